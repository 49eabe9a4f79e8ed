package worktree

import "strings"

// Prefix starts the name of every branch pibot makes.
const Prefix = "pibot/"

// maxPart bounds each part of a branch name, in bytes.
const maxPart = 48

// Name is the branch name of a conversation's place, from its parts (the
// platform, channel, thread: chat ids, untrusted): "pibot/" and the parts
// made safe (Sanitize) joined by "-".
func Name(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p = part(p); p != "" {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		kept = []string{"thread"}
	}
	return Prefix + strings.Join(kept, "-")
}

// Sanitize returns name as a branch name pibot would make: "pibot/" and
// one component of ASCII letters, digits, "_" and "-" (every other
// character becomes "-", runs of them one), never starting or ending with
// "-". Such a name satisfies git's rules for refs (no "..", no control
// characters, no ".lock" ending, no "@{") and cannot be read as an
// option.
func Sanitize(name string) string {
	return Name(strings.TrimPrefix(name, Prefix))
}

// part is one part of a name: safe characters only, dashes collapsed and
// trimmed, at most maxPart bytes.
func part(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= maxPart {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// leaf is the directory name of branch's worktree: the branch without
// "pibot/".
func leaf(branch string) string {
	return strings.ReplaceAll(strings.TrimPrefix(branch, Prefix), "/", "-")
}
