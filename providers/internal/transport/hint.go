package transport

import (
	"errors"
	"net"
	"syscall"
)

// unreachable returns the message of a failure to reach the provider that
// repeating cannot fix: nothing listens at the address, or the host does
// not exist. "" for any other failure. The failure is marked Permanent
// (see Failure), which is what keeps it from being retried; the text
// names the system's error as it is.
func (c *Client) unreachable(err error) string {
	where := c.BaseURL
	if where == "" {
		where = "the provider's base URL"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "nothing is listening at " + where + " (connection refused): is the server at " + where + " running? (check base_url of providers." + c.Provider + ")"
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.IsNotFound {
		return "no host named " + dns.Name + " (" + dns.Err + "): is the base URL " + where + " right? (base_url of providers." + c.Provider + ")"
	}
	return ""
}

// keyHint is added to a 401 or 403: which key was rejected.
func (c *Client) keyHint() string {
	if c.KeySource == "" {
		return " (the API key was rejected)"
	}
	return " (" + c.KeySource + " is set but the provider rejects it: check the key)"
}

// notFoundHint is added to a 404: a wrong model id or base URL.
func (c *Client) notFoundHint() string {
	return " (is the model id right, and does " + c.BaseURL + " serve this API? check agent.model and providers." + c.Provider + ")"
}

// overflowHint is added to a context-length error: the request does not
// fit the model's window, and repeating it as it is cannot help.
func (c *Client) overflowHint() string {
	return " (the conversation does not fit the model's context window: shorten the message or start a new conversation; pibot compacts a conversation as it nears providers." +
		c.Provider + ".models[].context_window, which must not be set above the model's real window)"
}
