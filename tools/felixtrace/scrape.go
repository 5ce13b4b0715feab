package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/felixmq/felix/broker"
)

// statsPath is the broker's JSON snapshot (broker.AdminHandler).
const statsPath = "/debug/felix/stats"

// scraper fetches /debug/felix/stats from one broker.
type scraper struct {
	url    string
	client *http.Client
}

// newScraper accepts HOST:PORT or an http(s) URL of the admin server.
func newScraper(admin string, timeout time.Duration) *scraper {
	base := admin
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	return &scraper{url: strings.TrimSuffix(base, "/") + statsPath, client: &http.Client{Timeout: timeout}}
}

func (s *scraper) scrape(ctx context.Context) (*broker.Stats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", s.url, resp.Status)
	}
	var st broker.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("GET %s: %w", s.url, err)
	}
	return &st, nil
}
