package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// writeTimeout bounds each write to an event stream, so that a client that
// stops reading cannot hold the handler forever.
const writeTimeout = 10 * time.Second

// events handles GET /events: Server-Sent Events. Every Source tick becomes
// an event named "change" (coalesced: at most one per MinEventInterval, the
// last tick of a burst always followed by an event), with a comment line
// every Heartbeat. The handler returns when the client goes away, when
// Config.Done is closed, or when the Source closes its channel.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	if !h.mayRead(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if n := h.streams.Add(1); n > int64(h.cfg.MaxStreams) {
		h.streams.Add(-1)
		w.Header().Set("Retry-After", "30")
		http.Error(w, "too many event streams", http.StatusServiceUnavailable)
		return
	}
	defer h.streams.Add(-1)

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ticks, err := h.src.Subscribe(ctx)
	if err != nil {
		h.log.Error("subscribe to changes", "err", err)
		http.Error(w, "live updates are unavailable", http.StatusServiceUnavailable)
		return
	}

	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	seq := 0
	send := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // not every writer supports it
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	event := func() bool {
		seq++
		return send(fmt.Sprintf("event: change\ndata: %d\n\n", seq))
	}
	// The retry field tells the browser how soon to reconnect.
	if _, err := io.WriteString(w, "retry: 3000\n: connected\n\n"); err != nil {
		return
	}
	if err := rc.Flush(); err != nil {
		if errors.Is(err, http.ErrNotSupported) {
			h.log.Error("event stream cannot flush", "err", err)
		}
		return
	}

	heartbeat := time.NewTicker(h.cfg.Heartbeat)
	defer heartbeat.Stop()
	hold := time.NewTimer(time.Hour) // the end of the coalescing window
	hold.Stop()
	defer hold.Stop()
	var last time.Time // when the last event went out
	pending := false   // a tick arrived inside the window

	for {
		select {
		case <-ctx.Done():
			return
		case <-h.cfg.Done:
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
			if pending {
				continue
			}
			if wait := h.cfg.MinEventInterval - time.Since(last); wait > 0 {
				pending = true
				hold.Reset(wait)
				continue
			}
			if !event() {
				return
			}
			last = time.Now()
		case <-hold.C:
			pending = false
			if !event() {
				return
			}
			last = time.Now()
		case <-heartbeat.C:
			if !send(": heartbeat\n\n") {
				return
			}
		}
	}
}
