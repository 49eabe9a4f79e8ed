package skills

import (
	"os"
	"path/filepath"
	"testing"
)

// fixture is a workspace and an agent directory with skills and
// templates covering pi's discovery rules.
type fixture struct {
	ws, agentDir, extra string
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{ws: filepath.Join(root, "ws"), agentDir: filepath.Join(root, "agent"), extra: filepath.Join(root, "extra")}
	sk := filepath.Join(f.ws, ".pi", "skills")
	write(t, filepath.Join(sk, "alpha", "SKILL.md"), "---\nname: alpha\ndescription: Workspace alpha.\n---\n\n# Alpha\n\nRun ./scripts/a.sh\n")
	write(t, filepath.Join(sk, "beta-tool", "SKILL.md"), "---\nname: beta-tool\ndescription: \"Escapes <tags> & \\\"quotes\\\" and 'apostrophes'\"\n---\nBeta body.\n")
	write(t, filepath.Join(sk, "beta-tool", "nested", "SKILL.md"), "---\ndescription: never found: the parent is a skill\n---\nx\n")
	write(t, filepath.Join(sk, "nodesc", "SKILL.md"), "---\nname: nodesc\n---\nbody\n")
	write(t, filepath.Join(sk, "broken", "SKILL.md"), "---\nname: [unclosed\ndescription: x\n---\nbody\n")
	write(t, filepath.Join(sk, "BadName", "SKILL.md"), "---\ndescription: Loaded despite its name.\n---\nbad\n")
	write(t, filepath.Join(sk, "hidden", "SKILL.md"), "---\ndescription: Not listed.\ndisable-model-invocation: true\n---\nHidden body.\n")
	write(t, filepath.Join(sk, "group", "inner", "SKILL.md"), "---\ndescription: Found two levels down.\n---\nInner body.\n")
	write(t, filepath.Join(sk, "crlf", "SKILL.md"), "---\r\ndescription: Windows line ends.\r\n---\r\nLine one.\r\nLine two.\r\n")
	write(t, filepath.Join(sk, "top.md"), "---\nname: top\ndescription: A markdown file at the top.\n---\nTop body.\n\ufeff")
	write(t, filepath.Join(sk, ".dot", "SKILL.md"), "---\ndescription: hidden folder\n---\n")
	write(t, filepath.Join(sk, "group", "notes.md"), "---\ndescription: not a skill below the top\n---\n")
	write(t, filepath.Join(f.agentDir, "skills", "alpha", "SKILL.md"), "---\ndescription: Global alpha wins.\n---\nGlobal alpha.\n")
	write(t, filepath.Join(f.agentDir, "skills", "global", "SKILL.md"), "---\ndescription: From the agent dir.\n---\nGlobal.\n")
	write(t, filepath.Join(f.extra, "extra-one", "SKILL.md"), "---\ndescription: From skills_dirs.\n---\nExtra.\n")

	pr := filepath.Join(f.ws, ".pi", "prompts")
	write(t, filepath.Join(pr, "review.md"), "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $1 carefully. Focus: ${@:2}\n")
	write(t, filepath.Join(pr, "fix.md"), "\n\nFix the following issue which is described in far more than sixty characters here: $@\n")
	write(t, filepath.Join(pr, "args.md"), "one=$1 two=$2 ten=$10 zero=$0 all=$@ args=$ARGUMENTS s2=${@:2} s21=${@:2:1} s0=${@:0} s9=${@:9}")
	write(t, filepath.Join(pr, "notes.txt"), "not a template")
	write(t, filepath.Join(f.agentDir, "prompts", "review.md"), "Global review of $1\n")
	write(t, filepath.Join(f.agentDir, "prompts", "hello.md"), "---\ndescription: Say hello\n---\nHello $ARGUMENTS!")
	return f
}

func (f fixture) sources() Sources {
	return Sources{
		Skills:  []string{filepath.Join(f.agentDir, "skills"), filepath.Join(f.ws, ".pi", "skills"), f.extra},
		Prompts: []string{filepath.Join(f.agentDir, "prompts"), filepath.Join(f.ws, ".pi", "prompts")},
	}
}

// inputs are the prompts whose expansion is compared with pi's.
var inputs = []string{
	"/skill:alpha",
	"/skill:alpha  fix the build  ",
	"/skill:crlf go",
	"/skill:hidden please",
	"/skill:BadName x",
	"/skill:missing args",
	"/skill:top",
	"/review src/x.go \"error handling\" 'and tests'",
	"/review",
	"/fix   the   bug",
	"/args a b c",
	"/args \"$1 $@\" lit$&x $$ $' $`",
	"/hello world",
	"/unknown stays",
	"plain text",
	" /review leading space",
	"/skill:alpha \u00a0tail\u00a0\ufeff",
	"/skill:top \u0085kept\u0085",
	"/review \u00e9t\u00e9 'a b'",
}
