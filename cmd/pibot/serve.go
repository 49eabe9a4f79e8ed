package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/secret"
)

// shutdownTimeout bounds the HTTP server's graceful shutdown.
const shutdownTimeout = 30 * time.Second

// serve runs `pibot serve`: the gateway with the web chat and Telegram on
// one HTTP listener, until SIGINT or SIGTERM.
func (c *cli) serve(ctx context.Context, args []string) error {
	fs := c.newFlags("serve")
	file := configFlag(fs)
	listen := fs.String("listen", "", "HTTP listen `ADDR` (overrides http.listen)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("serve", pos, 0, "no arguments"); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(*file)
	if err != nil {
		c.printConfigErrors(err)
		return &exitError{code: 1}
	}
	if *listen != "" {
		cfg.HTTP.Listen = *listen
	}
	if cfg.HTTP.Listen == "" {
		return &config.Error{Key: "http.listen", Msg: "must be set for serve (host:port)"}
	}
	log := newLogger(c.stderr, cfg.Log)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	mux := http.NewServeMux()
	adapters, err := c.serveAdapters(cfg, log, mux)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, err := openStack(ctx, cfg, c.getenv, log, adapters, reg)
	if err != nil {
		return err
	}
	defer st.close()

	var ready atomic.Bool
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting or stopping", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))

	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return &config.Error{Key: "http.listen", Msg: err.Error()}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()

	gwCtx, cancelGW := context.WithCancel(ctx)
	defer cancelGW()
	gwErr := make(chan error, 1)
	go func() { gwErr <- st.gw.Run(gwCtx) }()
	select {
	case <-st.gw.Ready():
	case err := <-gwErr:
		gwErr <- err
	case <-ctx.Done():
	}
	ready.Store(true)
	log.Info("pibot started", "version", version, "listen", ln.Addr().String(), "data_dir", cfg.DataDir, "web", cfg.WebEnabled(), "telegram", cfg.TelegramEnabled())
	fmt.Fprintf(c.stdout, "pibot ready on http://%s\n", ln.Addr())
	// Start-up garbage (config, providers, recovery) is returned to the OS
	// now rather than held until the heap grows again.
	debug.FreeOSMemory()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-srvErr:
		runErr = fmt.Errorf("http: %w", err)
		srvErr <- nil
	case err := <-gwErr:
		runErr = err
		if runErr == nil {
			runErr = errors.New("gateway stopped")
		}
		gwErr <- nil
	}
	stop()
	done := make(chan struct{})
	defer close(done)
	go c.exitOnSecondSignal(done)
	ready.Store(false)
	log.Info("shutting down")
	cancelGW()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := <-gwErr; err != nil && runErr == nil {
		runErr = err
	}
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-srvErr; err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		runErr = fmt.Errorf("http: %w", err)
	}
	log.Info("stopped")
	return runErr
}

// exitOnSecondSignal ends the process at once on another SIGINT/SIGTERM
// while a graceful shutdown runs, until done is closed.
func (c *cli) exitOnSecondSignal(done <-chan struct{}) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
		fmt.Fprintln(c.stderr, "pibot: second signal, exiting now")
		os.Exit(1)
	case <-done:
	}
}

// serveAdapters builds the configured adapters and mounts their HTTP
// handlers on mux.
func (c *cli) serveAdapters(cfg config.Config, log *slog.Logger, mux *http.ServeMux) ([]chat.Adapter, error) {
	var out []chat.Adapter
	if cfg.WebEnabled() {
		tok, err := config.ReadSecret("adapters.web.token", cfg.Adapter.Web.Token, cfg.Adapter.Web.TokenFile)
		if err != nil {
			return nil, err
		}
		if tok == "" && web.RequireToken(cfg.HTTP.Listen) {
			return nil, &config.Error{Key: "adapters.web.token", Msg: fmt.Sprintf(
				"required because http.listen %q is not a loopback address (or set adapters.web.enabled: false)", cfg.HTTP.Listen)}
		}
		w, err := web.New(web.Config{Token: secret.New(tok), Logger: log.With("adapter", "web")})
		if err != nil {
			return nil, err
		}
		mux.Handle("/", w.Handler())
		out = append(out, w)
	} else {
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "pibot is running; the web chat is disabled (adapters.web.enabled: false)")
		})
	}
	if cfg.TelegramEnabled() {
		tg := cfg.Adapter.Telegram
		tok, err := config.ReadSecret("adapters.telegram.token", tg.Token, tg.TokenFile)
		if err != nil {
			return nil, err
		}
		whSecret, err := config.ReadSecret("adapters.telegram.webhook_secret", tg.WebhookSecret, tg.WebhookSecretFile)
		if err != nil {
			return nil, err
		}
		a, err := telegram.New(telegram.Config{
			Token: secret.New(tok), APIURL: tg.APIURL, Mode: tg.Mode, WebhookURL: tg.WebhookURL,
			WebhookSecret: secret.New(whSecret), AllowedUpdates: tg.AllowedUpdates, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		if p := a.WebhookPath(); p != "" {
			mux.Handle("POST "+p, a.WebhookHandler())
		}
		out = append(out, a)
	}
	return out, nil
}
