package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Handler returns the API's handler, for tests that call it without a
// connection (the fuzz targets).
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Registry returns the server's metrics registry, for tests that check
// what it registers (the Grafana dashboard's test).
func (s *Server) Registry() *prometheus.Registry { return s.metrics.registry }
