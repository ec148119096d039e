package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var httpClient = &http.Client{Timeout: 30 * time.Second}

// Flush POSTs to an hmsproxy admin flush URL (…/cache/flush), with token
// as a bearer token when set.
func Flush(ctx context.Context, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return fmt.Errorf("bench: flush: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: flush: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: flush %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// ScrapeOutcomes reads hmsproxy_requests_total from a Prometheus text
// endpoint and sums it by outcome label.
func ScrapeOutcomes(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: metrics: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: metrics %s: %s", url, resp.Status)
	}
	return parseOutcomes(resp.Body, "hmsproxy_requests_total")
}

// parseOutcomes sums the samples of metric in Prometheus text format by
// their outcome label. Comment lines and other metrics are skipped.
func parseOutcomes(r io.Reader, metric string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, metric)
		if !ok || line == "" || line[0] == '#' {
			continue
		}
		var labels string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("bench: metrics: bad line %q", line)
			}
			labels, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric with this prefix
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("bench: metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("bench: metrics: bad value in %q", line)
		}
		out[labelValue(labels, "outcome")] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: metrics: %w", err)
	}
	return out, nil
}

// labelValue finds name="value" in a label list (values with escaped
// quotes are unescaped as Prometheus writes them).
func labelValue(labels, name string) string {
	for len(labels) > 0 {
		eq := strings.IndexByte(labels, '=')
		if eq < 0 || eq+1 >= len(labels) || labels[eq+1] != '"' {
			return ""
		}
		key := strings.TrimSpace(labels[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(labels) && labels[i] != '"'; i++ {
			if labels[i] == '\\' && i+1 < len(labels) {
				i++
				switch labels[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(labels[i])
				}
				continue
			}
			val.WriteByte(labels[i])
		}
		if key == name {
			return val.String()
		}
		labels = strings.TrimLeft(labels[min(i+1, len(labels)):], ", ")
	}
	return ""
}
