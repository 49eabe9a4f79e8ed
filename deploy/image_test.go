package deploy

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docker runs the docker command and returns its trimmed output.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// needDocker skips unless a container runtime answers.
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds an image; skipped with -short")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no container runtime: docker is not installed (the Dockerfile is checked by TestDockerfile)")
	}
	if out, err := docker(t, "info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Skipf("no container runtime: docker cannot reach a daemon (%s); the Dockerfile is checked by TestDockerfile", out)
	}
	for _, img := range baseImages(t) {
		if _, err := docker(t, "image", "inspect", img); err == nil {
			continue
		}
		out, err := docker(t, "pull", "-q", img)
		if err == nil {
			continue
		}
		if unreachable(out) {
			t.Skipf("the base image %s cannot be pulled: no registry is reachable (%s); the Dockerfile is checked by TestDockerfile", img, out)
		}
		t.Fatalf("docker pull %s: %v\n%s", img, err, out)
	}
}

// baseImages are the images the Dockerfile's stages start from, with the
// defaults of its ARGs filled in.
func baseImages(t *testing.T) []string {
	t.Helper()
	args := map[string]string{}
	stages := map[string]bool{}
	var out []string
	for _, in := range dockerfile(t) {
		switch in.op {
		case "ARG":
			if k, v, ok := strings.Cut(in.args, "="); ok {
				args[k] = strings.Trim(v, `"`)
			}
		case "FROM":
			f := strings.Fields(in.args)
			img := os.Expand(f[0], func(k string) string { return args[k] })
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stages[f[2]] = true
			}
			if !stages[img] && !slices.Contains(out, img) {
				out = append(out, img)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the Dockerfile has no FROM")
	}
	return out
}

// unreachable tells a pull that failed because no registry answers (a
// machine without network) from one that failed for a reason the test
// must report, such as a tag that does not exist.
func unreachable(out string) bool {
	for _, s := range []string{"no such host", "dial tcp", "i/o timeout", "connection refused", "network is unreachable", "TLS handshake timeout", "Client.Timeout"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// TestImage builds the image, starts it with the web chat off and waits for
// its HEALTHCHECK (pibot healthcheck against /healthz) to report healthy.
func TestImage(t *testing.T) {
	needDocker(t)
	tag := "pibot-test:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if out, err := docker(t, "build", "-t", tag, "--build-arg", "VERSION=v0.0.0-imagetest", "."); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = docker(t, "rmi", "-f", tag) })
	size, _ := docker(t, "image", "inspect", "--format", "{{.Size}}", tag)
	if n, err := strconv.ParseInt(size, 10, 64); err == nil {
		t.Logf("image %s: %.1f MB", tag, float64(n)/1e6)
	}
	if out, _ := docker(t, "run", "--rm", tag, "version", "--short"); out != "v0.0.0-imagetest" {
		t.Errorf("pibot version --short in the image = %q", out)
	}
	for _, tool := range []string{"bash", "git", "rg", "bwrap", "sort"} {
		if out, err := docker(t, "run", "--rm", "--entrypoint", "sh", tag, "-c", "command -v "+tool); err != nil {
			t.Errorf("%s is missing from the image: %s", tool, out)
		}
	}
	if out, _ := docker(t, "run", "--rm", "--entrypoint", "id", tag, "-u"); out == "0" {
		t.Error("the image runs as root")
	}
	id, err := docker(t, "run", "-d", "-e", "PIBOT_WEB=false", tag)
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, id)
	}
	t.Cleanup(func() { _, _ = docker(t, "rm", "-f", id) })
	// The health check's own interval paces this loop; the deadline only
	// bounds a broken image.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		status, err := docker(t, "inspect", "--format", "{{.State.Health.Status}}", id)
		if err != nil {
			t.Fatalf("docker inspect: %v\n%s", err, status)
		}
		if status == "healthy" {
			break
		}
		if status == "unhealthy" || time.Now().After(deadline) {
			logs, _ := docker(t, "logs", id)
			t.Fatalf("container health %q; logs:\n%s", status, logs)
		}
		time.Sleep(2 * time.Second)
	}
	if out, err := docker(t, "exec", id, "pibot", "healthcheck", "--ready"); err != nil || !strings.Contains(out, "/readyz: ok") {
		t.Errorf("pibot healthcheck --ready in the container: %v %s", err, out)
	}
}

// TestHadolint lints the Dockerfile where hadolint is installed (Debian
// does not package it; TestDockerfile checks the properties pibot needs).
func TestHadolint(t *testing.T) {
	if _, err := exec.LookPath("hadolint"); err != nil {
		t.Skip("hadolint is not installed")
	}
	cmd := exec.Command("hadolint", "Dockerfile")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("hadolint: %v\n%s", err, out)
	}
}
