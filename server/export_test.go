package server

import "net/http"

// Handler returns the API's handler, for tests that call it without a
// connection (the fuzz targets).
func (s *Server) Handler() http.Handler { return s.http.Handler }
