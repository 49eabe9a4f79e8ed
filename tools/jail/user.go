package jail

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// credential is the user commands run as.
type credential struct {
	uid, gid int
	groups   []int
}

// lookupUser resolves a user name or "uid[:gid]".
func lookupUser(s string) (*credential, error) {
	if u, g, ok := strings.Cut(s, ":"); ok || isNumber(s) {
		uid, err := strconv.Atoi(u)
		if err != nil || uid < 0 {
			return nil, fmt.Errorf("bad user %q: want a name or uid[:gid]", s)
		}
		gid := uid
		if ok {
			if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
				return nil, fmt.Errorf("bad group in %q: want a number", s)
			}
		}
		return &credential{uid: uid, gid: gid}, nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return nil, fmt.Errorf("unknown user %q: %w", s, err)
	}
	c := &credential{}
	if c.uid, err = strconv.Atoi(u.Uid); err != nil {
		return nil, fmt.Errorf("user %q: uid %q is not a number", s, u.Uid)
	}
	if c.gid, err = strconv.Atoi(u.Gid); err != nil {
		return nil, fmt.Errorf("user %q: gid %q is not a number", s, u.Gid)
	}
	ids, err := u.GroupIds()
	if err == nil {
		for _, id := range ids {
			if g, err := strconv.Atoi(id); err == nil && g != c.gid {
				c.groups = append(c.groups, g)
			}
		}
	}
	return c, nil
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
