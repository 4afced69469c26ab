// Command dra-oracle runs the reference structured-parameters allocator of
// k8s.io/dynamic-resource-allocation on scenarios given as JSON and prints
// what it decided. drakit's differential tests and allocator benchmark use
// it to hold the Python allocator to the reference's answers and speed.
//
//	dra-oracle [FILE]                  one scenario (FILE or stdin) -> one result
//	dra-oracle -batch                  JSON lines on stdin -> one result line each
//	dra-oracle -bench FILE [-iterations N]   scheduler-like workload -> JSON report
//
// The input and output contract is in README.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

func main() {
	batch := flag.Bool("batch", false, "read one scenario per line on stdin and print one result per line")
	benchFile := flag.String("bench", "", "run the scheduler-like workload in this JSON file and print a report")
	iterations := flag.Int("iterations", 5, "with -bench: how many passes over the workload (the median is reported)")
	timeout := flag.Duration("timeout", 10*time.Second, "time limit per Allocate call (the scheduler's default filter timeout)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: dra-oracle [-timeout D] [FILE] | -batch | -bench FILE [-iterations N]")
		flag.PrintDefaults()
	}
	flag.Parse()

	var err error
	switch {
	case *benchFile != "":
		err = benchMode(*benchFile, *iterations)
	case *batch:
		err = batchMode(os.Stdin, os.Stdout, *timeout)
	default:
		err = singleMode(flag.Arg(0), os.Stdout, *timeout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dra-oracle: %v\n", err)
		os.Exit(2)
	}
}

// answer parses and runs one scenario; a malformed scenario becomes an
// "error" outcome naming the field, like a fatal allocator error.
func answer(data []byte, caches celCaches, timeout time.Duration) result {
	sc, err := parseScenario(data)
	if err != nil {
		return result{Outcome: outcomeError, Error: "invalid scenario: " + err.Error()}
	}
	return runScenario(context.Background(), sc, caches.forFeatures(sc.features), timeout)
}

// celCaches keeps one compile cache per CEL-relevant feature combination,
// shared by all scenarios of a batch like the scheduler shares its cache
// across pods.
type celCaches map[cel.Features]*cel.Cache

func (c celCaches) forFeatures(features structured.Features) *cel.Cache {
	key := cel.Features{
		EnableConsumableCapacity: features.ConsumableCapacity,
		EnableListTypeAttributes: features.ListTypeAttributes,
	}
	if cache, ok := c[key]; ok {
		return cache
	}
	cache := newCELCache(100, features)
	c[key] = cache
	return cache
}

func singleMode(path string, out io.Writer, timeout time.Duration) error {
	var data []byte
	var err error
	if path == "" || path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	return writeJSON(out, answer(data, celCaches{}, timeout))
}

// batchMode answers line by line so that one process serves thousands of
// scenarios; blank lines are skipped, every other line gets exactly one
// result line in the same order.
func batchMode(in io.Reader, out io.Writer, timeout time.Duration) error {
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriter(out)
	defer writer.Flush()
	caches := celCaches{}
	for {
		line, err := reader.ReadBytes('\n')
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			if werr := writeJSON(writer, answer(trimmed, caches, timeout)); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func benchMode(path string, iterations int) error {
	if iterations <= 0 {
		return errors.New("-iterations: must be positive")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	w, err := parseWorkload(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	report, err := runBench(context.Background(), w, iterations)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeJSON(os.Stdout, report)
}

func writeJSON(out io.Writer, value any) error {
	data, err := json.Marshal(value)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", data)
	return err
}
