package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves the Go profiler on addr until the returned stop is
// called. It is off unless QUEEN_PPROF_ADDR is set.
func servePprof(log *slog.Logger, addr string) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Warn("config: pprof listener", "addr", addr, "err", err)
		}
	}()
	log.Info("config: pprof", "addr", addr)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
