package ioruntime

import (
	"os"
	"testing"

	"github.com/felixmq/felix/internal/testutil"
)

// TestMain fails the run if any test leaks a goroutine or a file descriptor.
func TestMain(m *testing.M) { os.Exit(testutil.RunWithLeakCheck(m)) }
