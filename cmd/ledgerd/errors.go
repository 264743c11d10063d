// Error answers: the JSON error body every endpoint uses, and the
// parsing of parameters that answers with it (docs/api.md).

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// apiError is the JSON body of every error response. Messages name fields
// and rules, never submitted values.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]apiError{"error": {Code: code, Message: fmt.Sprintf(format, args...)}})
}

// refuse answers an append with an error and counts it by code. The
// client has WriteTimeout from now to take the answer.
func (s *server) refuse(w http.ResponseWriter, status int, code, format string, args ...any) {
	s.m.reject(code)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout))
	writeError(w, status, code, format, args...)
}

func parseIndex(w http.ResponseWriter, text, what string) (uint64, bool) {
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != text {
		writeError(w, http.StatusBadRequest, "invalid_request", "%s is not a decimal integer", what)
		return 0, false
	}
	return v, true
}
