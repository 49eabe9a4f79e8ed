package extensions

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pibot/pibot/agent/skills"
)

// Kinds of workspace file.
const (
	kindContext  = "context"
	kindSkill    = "skill"
	kindTemplate = "template"
)

// contextFiles are the project instruction files looked for in the
// workspace, in order of preference (pi reads the first one found).
var contextFiles = []string{"AGENTS.md", "CLAUDE.md"}

// wsFile is a file of the workspace that goes into the system prompt or
// becomes a command once an owner approved its content.
type wsFile struct {
	Kind string `json:"kind"`
	// Path is relative to the workspace, with slashes.
	Path        string `json:"path"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// SHA256 is the hex SHA-256 of the file's content.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	abs    string
	// body is what the file adds: a context file's text, a skill's or
	// template's body.
	body string
}

func (f wsFile) key() string { return f.Kind + "\x00" + f.Path + "\x00" + f.SHA256 }

// record is the approvals file: the workspace files an owner approved,
// with their contents' hashes.
type record struct {
	// Workspace is the directory the files are in: a record of another
	// workspace approves nothing.
	Workspace string    `json:"workspace"`
	Hash      string    `json:"hash"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	Files     []wsFile  `json:"files"`
}

// wsView is the workspace's files at one moment, and what of them an
// owner approved.
type wsView struct {
	ws        string
	files     []wsFile // every one, in the order found
	context   *wsFile
	skills    []skills.Skill
	templates []skills.Template
	rec       record
	ok        map[string]bool // keys of the approved files
	diags     []skills.Diagnostic
}

// approved reports whether the workspace file at abs with content hash sha
// is approved as kind.
func (v wsView) approved(kind, abs, sha string) bool {
	rel, err := filepath.Rel(v.ws, abs)
	if err != nil {
		return false
	}
	return v.ok[wsFile{Kind: kind, Path: filepath.ToSlash(rel), SHA256: sha}.key()]
}

// pending returns the files not approved.
func (v wsView) pending() []wsFile {
	var out []wsFile
	for _, f := range v.files {
		if !v.ok[f.key()] {
			out = append(out, f)
		}
	}
	return out
}

// setHash is the hash of a set of files: the SHA-256 of their kinds,
// paths and contents' hashes, in order.
func setHash(files []wsFile) string {
	keys := make([]string, len(files))
	for i, f := range files {
		keys[i] = f.key()
	}
	slices.Sort(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, "\n")))
	return hex.EncodeToString(sum[:])
}

// shortHash is the part of a set hash owners see and type.
func shortHash(h string) string { return h[:12] }

// view reads the workspace's files and the approvals file. A file whose
// real path is outside the workspace (a symlink) is left out.
func (s *Set) view() wsView {
	ws := s.opts.Workspace
	v := wsView{ws: ws, ok: map[string]bool{}}
	if ws == "" {
		return v
	}
	for _, name := range contextFiles {
		p := filepath.Join(ws, name)
		data, err := os.ReadFile(p)
		if err != nil {
			continue // a missing or unreadable file is simply not used
		}
		if !v.within(p) {
			v.outside(p)
			break
		}
		f := wsFile{Kind: kindContext, Path: name, Name: name, SHA256: hexSHA256(data), Size: int64(len(data)), abs: p, body: string(data)}
		v.context = &f
		v.files = append(v.files, f)
		break
	}
	if s.opts.WorkspacePi {
		v.loadPi()
	}
	v.rec = readRecord(s.opts.Approvals, s.log)
	if v.rec.Workspace == ws {
		for _, f := range v.rec.Files {
			v.ok[f.key()] = true
		}
	}
	if p := v.pending(); len(p) > 0 {
		h := setHash(v.files)
		s.mu.Lock()
		fresh := s.warned != h
		s.warned = h
		s.mu.Unlock()
		if fresh {
			var names []string
			for _, f := range p {
				names = append(names, f.Path)
			}
			s.log.Warn("workspace files wait for an owner's approval and are not used until then: /extensions in chat shows them",
				"files", strings.Join(names, ", "), "hash", shortHash(h))
		}
	}
	return v
}

// loadPi reads the workspace's .pi/skills and .pi/prompts.
func (v *wsView) loadPi() {
	if dir := filepath.Join(v.ws, ".pi", "skills"); isDir(dir) {
		sk, diags := skills.Load(skills.Sources{Skills: []string{dir}})
		v.diags = append(v.diags, diags...)
		for _, k := range sk {
			if !v.within(k.FilePath) {
				v.outside(k.FilePath)
				continue
			}
			v.skills = append(v.skills, k)
			v.add(wsFile{Kind: kindSkill, Name: k.Name, Description: k.Description, SHA256: k.SHA256, abs: k.FilePath, body: k.Body})
		}
	}
	if dir := filepath.Join(v.ws, ".pi", "prompts"); isDir(dir) {
		ts, diags := skills.LoadTemplates(skills.Sources{Prompts: []string{dir}})
		v.diags = append(v.diags, diags...)
		for _, t := range ts {
			if !v.within(t.FilePath) {
				v.outside(t.FilePath)
				continue
			}
			v.templates = append(v.templates, t)
			v.add(wsFile{Kind: kindTemplate, Name: t.Name, Description: t.Description, SHA256: t.SHA256, abs: t.FilePath, body: t.Content})
		}
	}
}

// add adds f, found at f.abs, to the files.
func (v *wsView) add(f wsFile) {
	rel, err := filepath.Rel(v.ws, f.abs)
	if err != nil {
		return
	}
	f.Path = filepath.ToSlash(rel)
	if st, err := os.Stat(f.abs); err == nil {
		f.Size = st.Size()
	}
	v.files = append(v.files, f)
}

// within reports whether p's real path is inside the workspace.
func (v wsView) within(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	root, err := filepath.EvalSymlinks(v.ws)
	if err != nil {
		root = v.ws
	}
	rel, err := filepath.Rel(root, real)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// outside reports a workspace file that links outside the workspace.
func (v *wsView) outside(p string) {
	v.diags = append(v.diags, skills.Diagnostic{Path: p, Message: "leads outside the workspace (a symlink): not used", Skipped: true})
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// readRecord reads the approvals file at path; a missing or unreadable one
// approves nothing (an unreadable one is logged).
func readRecord(path string, log *slog.Logger) record {
	var rec record
	if path == "" {
		return rec
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec
	}
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil {
		log.Error("workspace approvals cannot be read: nothing of the workspace is used", "file", path, "err", err)
		return record{}
	}
	return rec
}

// sortFiles orders files for display: by kind, then path.
func sortFiles(files []wsFile) {
	order := map[string]int{kindContext: 0, kindSkill: 1, kindTemplate: 2}
	slices.SortStableFunc(files, func(a, b wsFile) int {
		return cmp.Or(cmp.Compare(order[a.Kind], order[b.Kind]), cmp.Compare(a.Path, b.Path))
	})
}

// hexSHA256 is the hex SHA-256 of data.
func hexSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
