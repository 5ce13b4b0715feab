package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// signalWriter is a goroutine-safe buffer that closes seen once its content
// contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, seen: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// `felix roster join` stays joined until interrupted; `felix roster watch`
// prints the set, then the leave that the join's exit causes.
func TestRosterJoinWatchLeaveOnExit(t *testing.T) {
	tb := startBroker(t)
	jctx, stopJoin := context.WithCancel(ctxT(t))
	joinOut := newSignalWriter("joined")
	var joinErr bytes.Buffer
	joinCode := make(chan int, 1)
	go func() {
		joinCode <- roster(jctx, append([]string{"join"}, tb.args("--roster", "lobby", "--meta", `{"a":1}`, "alice")...), joinOut, &joinErr)
	}()
	<-joinOut.seen
	require.Equal(t, "joined lobby as alice\n", joinOut.String())

	watchOut := newSignalWriter("synced")
	var watchErr bytes.Buffer
	watchCode := make(chan int, 1)
	go func() {
		watchCode <- roster(ctxT(t), append([]string{"watch"}, tb.args("--roster", "lobby", "--count", "1")...), watchOut, &watchErr)
	}()
	<-watchOut.seen
	stopJoin()
	require.Equal(t, exitOK, <-joinCode, joinErr.String())
	require.Equal(t, exitOK, <-watchCode, watchErr.String())
	require.Equal(t, "member alice {\"a\":1}\nsynced 1\nleave alice\n", watchOut.String())
}

func TestRosterUsage(t *testing.T) {
	for _, args := range [][]string{
		{"roster"},
		{"roster", "dance"},
		{"roster", "join", "alice"},
		{"roster", "join", "--roster", "r"},
		{"roster", "join", "--roster", "r", "--meta", "{nope", "alice"},
		{"roster", "watch", "--roster", "r", "extra"},
	} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "felix roster", args)
	}
}
