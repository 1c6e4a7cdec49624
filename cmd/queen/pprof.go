package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/queen-mq/queen/crypto/authn"
	"github.com/queen-mq/queen/crypto/secret"
)

// servePprof serves the Go profiler on addr until the returned stop is
// called. It is off unless QUEEN_PPROF_ADDR is set; with QUEEN_PPROF_TOKEN
// every request must carry it (loadConfig refuses an address beyond
// loopback without one).
func servePprof(log *slog.Logger, addr, token string) (stop func()) {
	srv := &http.Server{Addr: addr, Handler: pprofHandler(token), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Warn("config: pprof listener", "addr", addr, "err", err)
		}
	}()
	log.Info("config: pprof", "addr", addr, "token", secret.Mask(token))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}

// pprofHandler is the profiler's routes, behind the bearer token when one
// is set (compared in constant time).
func pprofHandler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	if token == "" {
		return mux
	}
	m := secret.NewMatcher(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented, _ := authn.BearerToken(r.Header.Get("Authorization"))
		if !m.Match(presented) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "QUEEN_PPROF_TOKEN required", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
