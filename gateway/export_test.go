package gateway

// CommandInfo is one entry of the command table as gateway_test sees it.
type CommandInfo struct {
	Name, Args, Help string
	Hidden           bool
	// DM and Group are the rights: anyone, owners to change, owners or
	// requester, owners.
	DM, Group  string
	Looks      []string // the arguments that only look
	EchoArg    bool
	Session    string // none, if bound, bound, open
	Queue      string
	HasHandler bool
}

// GroupRightsNote is the last paragraph of /help.
const GroupRightsNote = groupRightsNote

// CommandTable returns the command table.
func CommandTable() []CommandInfo {
	rights := map[right]string{rightAnyone: "anyone", rightOwnersToChange: "owners to change", rightOwnersOrRequester: "owners or requester", rightOwners: "owners"}
	needs := map[need]string{sessionNone: "none", sessionIfBound: "if bound", sessionBound: "bound", sessionOpen: "open"}
	var out []CommandInfo
	for _, c := range commandTable() {
		out = append(out, CommandInfo{
			Name: c.name, Args: c.args, Help: c.help, Hidden: c.hidden,
			DM: rights[c.dm], Group: rights[c.group], Looks: c.looks, EchoArg: c.echoArg,
			Session: needs[c.session], Queue: c.queue, HasHandler: c.handle != nil,
		})
	}
	return out
}
