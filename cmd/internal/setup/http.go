package setup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve listens on addr (unless it is "off") and serves h until ctx ends; shutdown is bounded.
// It returns the address actually bound (port 0 picks one) after the listener is up.
func Serve(ctx context.Context, addr ListenAddr, h http.Handler, log *slog.Logger) (string, error) {
	if addr == "off" || addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", string(addr))
	if err != nil {
		return "", fmt.Errorf("http: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", slog.Any("error", err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("http listening", slog.String("http_addr", ln.Addr().String()))
	return ln.Addr().String(), nil
}
