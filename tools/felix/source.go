package main

import (
	"bufio"
	"bytes"
	"io"

	"github.com/felixmq/felix/wire"
)

// batches yields the next batch of payloads to publish, or nil at the end.
// A batch is only valid until the next call.
type batches func() ([][]byte, error)

// repeated yields payload count times, k per batch.
func repeated(payload []byte, count, k int) batches {
	left := count
	batch := make([][]byte, 0, min(k, count))
	return func() ([][]byte, error) {
		n := min(k, left)
		if n == 0 {
			return nil, nil
		}
		left -= n
		batch = batch[:0]
		for range n {
			batch = append(batch, payload)
		}
		return batch, nil
	}
}

// lines yields the lines of r (without their line ending), k per batch. It
// publishes as it reads, so `tail -f log | felix pub` works; a partial batch
// waits for k lines or the end of input.
func lines(r io.Reader, k int) batches {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), wire.DefaultMaxFrameBytes)
	return func() ([][]byte, error) {
		var batch [][]byte
		for len(batch) < k && sc.Scan() {
			// The scanner reuses its buffer on the next Scan.
			batch = append(batch, bytes.Clone(sc.Bytes()))
		}
		if len(batch) == 0 {
			return nil, sc.Err()
		}
		return batch, nil
	}
}
