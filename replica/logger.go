package replica

import (
	"fmt"
	"log/slog"
)

// raftLogger sends raft's own logging to the group's logger: its warnings
// and errors as such, its chatter (elections, appends) at debug level.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                 { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                  { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)  { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)               { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any)                 { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) { r.l.Error(fmt.Sprintf(format, v...)) }

// Fatal and Panic are raft's broken invariants: they panic, with the
// package prefix, as this project's invariant checks do.
func (r raftLogger) Fatal(v ...any) { panic("replica: raft: " + fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) {
	panic("replica: raft: " + fmt.Sprintf(format, v...))
}
func (r raftLogger) Panic(v ...any) { panic("replica: raft: " + fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) {
	panic("replica: raft: " + fmt.Sprintf(format, v...))
}
