package discord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrTokenRefused is wrapped by every error once Discord refused the bot
// token (REST 401, gateway close code 4004).
var ErrTokenRefused = errors.New("discord: invalid token: Discord refused the bot token (adapters.discord.token); it is wrong or was reset in the developer portal")

// transport is the REST client's RoundTripper. It rewrites
// https://discord.com/api/v9 (discordgo's fixed endpoints) to the
// configured base URL and API v10, refuses every call once the token was
// refused (Discord bans IPs that keep calling with a bad token), and turns
// 429s and 5xx answers into errors: a 429 pauses its route (or every route
// when global) for the time Discord asks, read from the body's retry_after
// or the Retry-After header.
type transport struct {
	r    *caller
	base http.RoundTripper
}

// rateLimited is a 429 from Discord.
type rateLimited struct {
	retryAfter time.Duration
	global     bool
	route      string
}

func (e *rateLimited) Error() string {
	scope := "route " + e.route
	if e.global {
		scope = "every route (global)"
	}
	return fmt.Sprintf("429 Too Many Requests on %s, retry after %s", scope, e.retryAfter)
}

// serverError is a 5xx answer.
type serverError struct{ status int }

func (e *serverError) Error() string { return fmt.Sprintf("Discord answered HTTP %d", e.status) }

// routeKey names the rate-limit route of a REST path: its resource and
// major parameter ("channels/123", "webhooks/<app>/<token hash>",
// "interactions/<id>"), as Discord buckets routes per major parameter.
func routeKey(path string) string {
	path = strings.TrimPrefix(path, "/")
	for _, pre := range []string{"api/v9/", "api/v10/"} {
		path = strings.TrimPrefix(path, pre)
	}
	p := strings.Split(path, "/")
	switch {
	case len(p) >= 3 && p[0] == "webhooks":
		return "webhooks/" + p[1] + "/" + shortHash(p[2])
	case len(p) >= 5 && p[0] == "channels" && p[4] == "reactions":
		return chanRoute(p[1], "reactions")
	case len(p) >= 3 && p[0] == "channels":
		return chanRoute(p[1], p[2])
	case len(p) >= 2:
		return p[0] + "/" + p[1]
	}
	return path
}

// chanRoute is the route key of a channel's sub-resource ("messages",
// "typing", "reactions").
func chanRoute(ch, sub string) string { return "channels/" + ch + "/" + sub }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	closeBody := func() {
		if r.Body != nil {
			_ = r.Body.Close()
		}
	}
	if err := t.r.refusedErr(); err != nil {
		closeBody()
		return nil, err
	}
	route := routeKey(r.URL.Path)
	r = r.Clone(r.Context())
	if strings.HasPrefix(r.URL.Path, "/api/v9/") {
		r.URL.Path = apiPath + "/" + strings.TrimPrefix(r.URL.Path, "/api/v9/")
		r.URL.RawPath = ""
	}
	if u := t.r.api; u != nil && (r.URL.Host == "discord.com" || r.URL.Host == "discordapp.com") {
		r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		closeBody()
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized && !strings.Contains(r.URL.Path, "/webhooks/") && !strings.Contains(r.URL.Path, "/interactions/"):
		drain(resp)
		return nil, t.r.refuse(fmt.Errorf("HTTP 401 Unauthorized on %s %s: %w", r.Method, route, ErrTokenRefused))
	case resp.StatusCode == http.StatusTooManyRequests:
		rl := parse429(resp, route)
		drain(resp)
		t.r.limiter.pause(route, rl.global, rl.retryAfter)
		t.r.log.Warn("discord: 429 Too Many Requests; the route waits", "route", route, "global", rl.global, "retry_after", rl.retryAfter)
		return nil, rl
	case resp.StatusCode >= 500:
		drain(resp)
		return nil, &serverError{status: resp.StatusCode}
	}
	t.r.limiter.observe(route, resp.Header)
	return resp, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// parse429 reads a 429: retry_after (seconds, a float) and global from a
// JSON body, else the Retry-After header, else one second.
func parse429(resp *http.Response, route string) *rateLimited {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = io.NopCloser(bytes.NewReader(nil))
	rl := &rateLimited{route: route, global: resp.Header.Get("X-RateLimit-Global") != "" || resp.Header.Get("X-RateLimit-Scope") == "global"}
	var body struct {
		RetryAfter *float64 `json:"retry_after"`
		Global     bool     `json:"global"`
	}
	if json.Unmarshal(raw, &body) == nil && body.RetryAfter != nil {
		rl.retryAfter = time.Duration(*body.RetryAfter * float64(time.Second))
		rl.global = rl.global || body.Global
	}
	if h := resp.Header.Get("Retry-After"); h != "" {
		if f, err := strconv.ParseFloat(h, 64); err == nil {
			rl.retryAfter = max(rl.retryAfter, time.Duration(f*float64(time.Second)))
		}
	}
	if rl.retryAfter <= 0 {
		rl.retryAfter = time.Second
	}
	return rl
}
