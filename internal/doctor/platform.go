package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// maxBody bounds an answer read by a check (a model list of a large
// router runs to a few hundred kilobytes).
const maxBody = 8 << 20

// Cred is a credential to try against its service.
type Cred struct {
	// Name is the check's name ("telegram", "provider openai").
	Name string
	// URL is the API root as the client pibot serves with resolves it
	// from the configuration (telegram.APIRoot, slack.APIRoot,
	// discord.APIRoot, providers.Config.Root): doctor adds only the
	// method's path.
	URL   string
	Token string
	// Key is the configuration key to fix ("adapters.telegram.token").
	Key string
	// URLKey is the configuration key of URL, named when the service
	// cannot be reached.
	URLKey string
	// Headers are sent with the request (a provider's extra headers).
	Headers map[string]string
	// Client makes the request; nil means http.DefaultClient.
	Client *http.Client
}

// at is the URL of path (which starts with a slash) under the root.
func (c Cred) at(path string) string { return strings.TrimRight(c.URL, "/") + path }

// answer is one HTTP exchange's outcome.
type answer struct {
	status int
	body   []byte
	host   string // never the path, which may hold a token (Telegram's)
}

// do sends a request and reads the answer. Its errors never contain the
// URL, which may carry the credential.
func (c Cred) do(ctx context.Context, method, u string, header http.Header) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return answer{}, fmt.Errorf("bad API URL: %w", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return answer{}, fmt.Errorf("cannot reach %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return answer{}, fmt.Errorf("read answer of %s: %w", req.URL.Host, err)
	}
	return answer{status: resp.StatusCode, body: body, host: req.URL.Host}, nil
}

// unreachable is the finding for a transport error.
func (c Cred) unreachable(err error) Finding {
	fix := "check the network or a proxy"
	if c.URLKey != "" {
		fix += ", or " + c.URLKey
	}
	return failf(c.Name, fix, "%v", err)
}

// unexpected is the finding for an answer that is neither a success nor
// a rejected credential. A 404 means the API is not where the root says
// (a wrong api_url or base_url), not that the service is down.
func (c Cred) unexpected(a answer) Finding {
	if a.status == http.StatusNotFound {
		fix := "check the API URL"
		if c.URLKey != "" {
			fix = "check " + c.URLKey + ": it must name the service's API root"
		}
		return failf(c.Name, fix, "no such API method at %s (404 Not Found): %s", a.host, snippet(a.body))
	}
	return failf(c.Name, "the service may be down; try again later", "unexpected answer %d %s from %s: %s",
		a.status, http.StatusText(a.status), a.host, snippet(a.body))
}

// notTheAPI is the finding for a success answer in another shape than
// the service's: api_url names another server.
func (c Cred) notTheAPI(a answer) Finding {
	fix := "check the API URL"
	if c.URLKey != "" {
		fix = "check " + c.URLKey + ": it must name the service's API root"
	}
	return failf(c.Name, fix, "%s answered, but not as the API does: %s", a.host, snippet(a.body))
}

// snippet is the start of a body, on one line, for an error message.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// Telegram calls getMe with the bot token.
func Telegram(c Cred) Check {
	return Check{Name: c.Name, Run: func(ctx context.Context) Finding {
		a, err := c.do(ctx, http.MethodGet, c.at("/bot"+c.Token+"/getMe"), nil)
		if err != nil {
			return c.unreachable(err)
		}
		var r struct {
			OK          bool   `json:"ok"`
			Description string `json:"description"`
			Result      struct {
				Username string `json:"username"`
			} `json:"result"`
		}
		_ = json.Unmarshal(a.body, &r)
		switch {
		case a.status == http.StatusOK && r.OK:
			return okf(c.Name, "bot @%s (getMe)", r.Result.Username)
		case a.status == http.StatusUnauthorized || a.status == http.StatusNotFound:
			return failf(c.Name, "set "+c.Key+" to the token @BotFather gave (or revoke and copy a new one)",
				"token rejected by getMe (%d %s)", a.status, r.Description)
		}
		return c.unexpected(a)
	}}
}

// Slack calls auth.test with the bot token.
func Slack(c Cred) Check {
	return Check{Name: c.Name, Run: func(ctx context.Context) Finding {
		a, err := c.do(ctx, http.MethodPost, c.at("/auth.test"),
			http.Header{"Authorization": {"Bearer " + c.Token}})
		if err != nil {
			return c.unreachable(err)
		}
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
			User  string `json:"user"`
			Team  string `json:"team"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &r) != nil {
			return c.unexpected(a)
		}
		if !r.OK {
			return failf(c.Name, "set "+c.Key+" to the app's Bot User OAuth Token (xoxb-…) and reinstall the app if it was revoked",
				"token rejected by auth.test (%s)", r.Error)
		}
		return okf(c.Name, "@%s in %s (auth.test)", r.User, r.Team)
	}}
}

// SlackApp calls apps.connections.open with the app-level token (Socket
// Mode's token): Slack answers with a connection URL, which doctor does
// not open.
func SlackApp(c Cred) Check {
	return Check{Name: c.Name, Run: func(ctx context.Context) Finding {
		a, err := c.do(ctx, http.MethodPost, c.at("/apps.connections.open"),
			http.Header{"Authorization": {"Bearer " + c.Token}})
		if err != nil {
			return c.unreachable(err)
		}
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &r) != nil {
			return c.unexpected(a)
		}
		if !r.OK {
			return failf(c.Name, "set "+c.Key+" to an app-level token (xapp-…) with connections:write (Basic Information → App-Level Tokens)",
				"token rejected by apps.connections.open (%s)", r.Error)
		}
		return okf(c.Name, "Socket Mode connection offered (apps.connections.open)")
	}}
}

// Discord calls users/@me with the bot token.
func Discord(c Cred) Check {
	return Check{Name: c.Name, Run: func(ctx context.Context) Finding {
		a, err := c.do(ctx, http.MethodGet, c.at("/users/@me"),
			http.Header{"Authorization": {"Bot " + c.Token}})
		if err != nil {
			return c.unreachable(err)
		}
		var r struct {
			ID       string `json:"id"`
			Username string `json:"username"`
			Message  string `json:"message"`
		}
		_ = json.Unmarshal(a.body, &r)
		switch {
		case a.status == http.StatusOK && r.ID != "":
			return okf(c.Name, "bot %s (users/@me)", r.Username)
		case a.status == http.StatusOK:
			return c.notTheAPI(a)
		case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
			return failf(c.Name, "set "+c.Key+" to the bot token of the Developer Portal's Bot page (Reset Token if it leaked)",
				"token rejected by users/@me (%d %s)", a.status, r.Message)
		}
		return c.unexpected(a)
	}}
}

// modelList is the shape both OpenAI's and Anthropic's model lists share.
type modelList struct {
	Data []struct {
		ID string `json:"id"`
	} `json:"data"`
}

// OpenAIModels lists an OpenAI-compatible provider's models (GET
// /models). It warns about configured models (want) the list lacks.
func OpenAIModels(c Cred, want []string) Check {
	return Check{Name: c.Name, Run: func(ctx context.Context) Finding {
		h := http.Header{}
		if c.Token != "" {
			h.Set("Authorization", "Bearer "+c.Token)
		}
		a, err := c.do(ctx, http.MethodGet, c.at("/models"), h)
		if err != nil {
			return c.unreachable(err)
		}
		return c.models(a, want)
	}}
}

// AnthropicModels lists an Anthropic provider's models (GET /v1/models).
// Anthropic lists dated model ids, so configured aliases are not compared.
func AnthropicModels(c Cred) Check {
	return Check{Name: c.Name, Run: func(ctx context.Context) Finding {
		a, err := c.do(ctx, http.MethodGet, c.at("/v1/models"),
			http.Header{"X-Api-Key": {c.Token}, "Anthropic-Version": {"2023-06-01"}})
		if err != nil {
			return c.unreachable(err)
		}
		return c.models(a, nil)
	}}
}

// models judges a model list answer.
func (c Cred) models(a answer, want []string) Finding {
	switch a.status {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		fix := "set " + c.Key + " to a valid key"
		if strings.Contains(c.Key, ".") {
			fix = "set " + c.Key + " (or " + c.Key + "_file) to a valid key"
		}
		return failf(c.Name, fix, "key rejected (%d %s): %s",
			a.status, http.StatusText(a.status), snippet(a.body))
	default:
		return c.unexpected(a)
	}
	var l modelList
	if err := json.Unmarshal(a.body, &l); err != nil {
		return failf(c.Name, "check that the base URL points at the API root", "the model list is not JSON: %s", snippet(a.body))
	}
	ids := make([]string, len(l.Data))
	for i, m := range l.Data {
		ids[i] = m.ID
	}
	var missing []string
	for _, w := range want {
		if !slices.Contains(ids, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return Finding{Check: c.Name, Status: Warn, Detail: fmt.Sprintf("key works, but the provider does not list %s", strings.Join(missing, ", ")),
			Fix: "check the model ids in the configuration"}
	}
	return okf(c.Name, "key works, %d models listed", len(ids))
}
