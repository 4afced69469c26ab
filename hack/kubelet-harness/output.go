package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// event is one line of the harness's machine-readable output. Only the
// fields that apply to a kind of event are set; the others are omitted.
type event struct {
	Event      string              `json:"event"`
	Pod        string              `json:"pod,omitempty"`
	UID        string              `json:"uid,omitempty"`
	Containers map[string][]string `json:"containers,omitempty"`
	Driver     string              `json:"driver,omitempty"`
	Endpoint   string              `json:"endpoint,omitempty"`
	Versions   []string            `json:"versions,omitempty"`
	Error      string              `json:"error,omitempty"`
}

// emitter writes events as JSON lines. It is safe for concurrent use and
// writes each event with a single Write call, so lines never interleave.
type emitter struct {
	mu  sync.Mutex
	out io.Writer
}

// openEmitter returns an emitter for "-" (standard output) or a file path,
// which is created or appended to.
func openEmitter(dest string) (*emitter, error) {
	if dest == "" || dest == "-" {
		return &emitter{out: os.Stdout}, nil
	}
	f, err := os.OpenFile(dest, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--output %s: %w", dest, err)
	}
	return &emitter{out: f}, nil
}

func (e *emitter) emit(ev event) {
	line, err := json.Marshal(ev)
	if err != nil {
		// Every field is a plain string, slice or map of strings.
		panic(fmt.Sprintf("encode event: %v", err))
	}
	line = append(line, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.out.Write(line)
}
