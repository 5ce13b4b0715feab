module github.com/felixmq/felix

go 1.26.0

require (
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/quic-go/quic-go v0.65.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
