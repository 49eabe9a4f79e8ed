package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthcheckTimeout bounds one probe; a container runtime's own timeout
// should be longer.
const healthcheckTimeout = 4 * time.Second

// runHealthcheck runs `pibot healthcheck [-c FILE] [--ready] [--url URL]`:
// it asks the running pibot's /healthz (or /readyz) on http.listen and
// exits 0 when it answers 200. It is the container image's HEALTHCHECK,
// which needs no curl or wget this way.
func runHealthcheck(ctx context.Context, c *cli, args []string) error {
	fs := c.newFlags("healthcheck")
	file := configFlag(fs)
	ready := fs.Bool("ready", false, "probe /readyz (gateway running, data directory writable) instead of /healthz")
	url := fs.String("url", "", "probe this `URL` instead of the one http.listen gives")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("healthcheck", pos, 0, "no arguments"); err != nil {
		return err
	}
	target := *url
	if target == "" {
		cfg, _, err := c.loadConfig(*file)
		if err != nil {
			c.printConfigErrors(err)
			return &exitError{code: 1}
		}
		path := "/healthz"
		if *ready {
			path = "/readyz"
		}
		base, err := probeBase(cfg.HTTP.Listen)
		if err != nil {
			return err
		}
		target = base + path
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return usageErr("healthcheck: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: %s: %s", target, resp.Status, msg)
	}
	fmt.Fprintf(c.stdout, "%s: %s\n", target, msg)
	return nil
}

// probeBase turns a listen address into the URL to probe it at: a
// wildcard host (":8080", "0.0.0.0:8080", "[::]:8080") is reached on the
// loopback address of its family.
func probeBase(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("healthcheck: http.listen %q: %w", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
