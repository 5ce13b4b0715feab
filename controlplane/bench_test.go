package controlplane

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/felixmq/felix/controlplane/api"
)

// benchInstance serves a fresh control plane over real HTTP on backend b.
func benchInstance(b *testing.B, be backend) *instance {
	in := newBootstrapInstance(b, be.open(b)(b))
	in.seed(b)
	return in
}

// BenchmarkCreateStream is one POST of a stream through the API: decode,
// authorize, validate, one store transaction, the JSON answer.
func BenchmarkCreateStream(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			in := benchInstance(b, be)
			b.ResetTimer()
			for i := range b.N {
				in.mustDo(b, http.StatusCreated, "POST", streamsURL, fmt.Sprintf(`{"stream":"s%d","shards":4}`, i))
			}
		})
	}
}

// BenchmarkChangesPage is one GET /v1/changes page of 100 changes from a
// cursor inside a 1000-change history. On etcd the tail holds it all;
// etcd-behind-tail has a one-change tail, so every page is a watch from the
// past (etcd's 100 ms catch-up cycle: what a reader far behind pays).
func BenchmarkChangesPage(b *testing.B) {
	behind := backend{"etcd-behind-tail", func(t testing.TB) func(testing.TB) Store {
		etcdClient(t)
		prefix := etcdPrefix()
		return func(t testing.TB) Store {
			es, err := NewEtcdStore(EtcdConfig{Client: etcdClient(t), Prefix: prefix, TailSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { es.Close() })
			return es
		}
	}}
	for _, be := range append(backends, behind) {
		b.Run(be.name, func(b *testing.B) {
			in := benchInstance(b, be)
			in.follow(b) // starts the etcd tail before the history is written
			var revs []int64
			for i := range 1000 {
				var s api.Stream
				in.mustDo(b, http.StatusCreated, "POST", streamsURL, fmt.Sprintf(`{"stream":"s%d"}`, i)).decode(b, &s)
				revs = append(revs, s.Revision)
			}
			b.ResetTimer()
			for i := range b.N {
				cursor := revs[(i*100)%800]
				p := in.changes(b, fmt.Sprintf("cursor=%d&limit=100", cursor))
				if len(p.Changes) != 100 || !p.Truncated {
					b.Fatalf("page of %d changes, truncated %v", len(p.Changes), p.Truncated)
				}
			}
		})
	}
}
