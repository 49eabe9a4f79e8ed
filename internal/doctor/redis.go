package doctor

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Redis connects to a redis:// or rediss:// URL, authenticates when the
// URL has a password, and sends PING (raw RESP: doctor needs no client
// library for one command). key is the configuration key to fix.
func Redis(name, rawURL, key string) Check {
	return Check{Name: name, Run: func(ctx context.Context) Finding {
		u, err := url.Parse(rawURL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return failf(name, "write it as redis://[user:password@]host:port/db", "%s is not a redis:// URL", key)
		}
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "6379")
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return failf(name, "start Redis or fix "+key, "cannot connect to %s: %v", addr, opError(err))
		}
		defer conn.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		if u.Scheme == "rediss" {
			tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
			if err := tc.HandshakeContext(ctx); err != nil {
				return failf(name, "check the server's TLS certificate or use redis://", "TLS with %s: %v", addr, err)
			}
			conn = tc
		}
		r := bufio.NewReader(conn)
		if pw, ok := u.User.Password(); ok {
			args := []string{"AUTH", pw}
			if user := u.User.Username(); user != "" {
				args = []string{"AUTH", user, pw}
			}
			if reply, err := roundTrip(conn, r, args...); err != nil || reply != "+OK" {
				return failf(name, "fix the password in "+key, "authentication refused by %s: %s", addr, replyOrErr(reply, err))
			}
		}
		reply, err := roundTrip(conn, r, "PING")
		if err != nil {
			return failf(name, "check that "+addr+" is a Redis server", "PING: %v", err)
		}
		if reply != "+PONG" {
			fix := "check the server"
			if strings.HasPrefix(reply, "-NOAUTH") {
				fix = "put the password in " + key + " (redis://:password@host:port)"
			}
			return failf(name, fix, "PING answered %q", reply)
		}
		if _, hasPW := u.User.Password(); !hasPW && !loopback(u.Hostname()) {
			return Finding{Check: name, Status: Warn,
				Detail: fmt.Sprintf("%s answers without a password and is not on loopback: anyone who reaches it reads and deletes the replicas' shared state", addr),
				Fix:    "set requirepass in Redis and put the password in " + key + " (redis://:password@host:port)"}
		}
		return okf(name, "PING answered by %s", addr)
	}}
}

// loopback reports whether host is localhost or a loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// roundTrip sends one command as a RESP array and reads one reply line.
func roundTrip(conn net.Conn, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func replyOrErr(reply string, err error) string {
	if err != nil {
		return err.Error()
	}
	return reply
}

// opError drops the "dial tcp" wrapping of a connection error.
func opError(err error) error {
	if oe, ok := err.(*net.OpError); ok && oe.Err != nil {
		return oe.Err
	}
	return err
}
