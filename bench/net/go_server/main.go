// go_server is usched_netbench's Go peer: the standard library's net/http
// server, with the reply of floor_server byte for byte, so that the rows
// differ in the server and not in what goes over the wire.
//
//	go_server -port N
//
// It listens on 127.0.0.1 and answers every request with 200, text/plain,
// "Hello, world!", keeping connections alive. SIGINT or SIGTERM shuts it
// down (idle connections closed, none in flight cut) with exit status 0. A
// bad flag is one line on stderr and exit status 2; a failure to listen,
// exit status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

var body = []byte("Hello, world!")

// contentLength is set explicitly, as floor_server sends it; net/http would
// add it for a body this small anyway.
var contentLength = strconv.Itoa(len(body))

// shutdownBound is how long a stop waits for connections still in flight.
const shutdownBound = 5 * time.Second

// hello writes the fixed reply. net/http adds a Date header to every
// response unless it is set to nil; it is left out so that Go's reply is the
// floor's 78 bytes (Content-Length and Content-Type come out in sorted
// order, the floor's are the other way round: the same bytes, reordered).
func hello(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h["Date"] = nil
	h["Content-Type"] = []string{"text/plain"}
	h["Content-Length"] = []string{contentLength}
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

func main() {
	flags := flag.NewFlagSet("go_server", flag.ContinueOnError)
	// The flag package's own report is several lines; one is enough.
	flags.SetOutput(io.Discard)
	port := flags.Int("port", 0, "TCP port to listen on, 127.0.0.1 (1..65535)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "go_server: %v; usage: go_server -port N\n", err)
		os.Exit(2)
	}
	if flags.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "go_server: '%s' is not a flag; usage: go_server -port N\n", flags.Arg(0))
		os.Exit(2)
	}
	if *port < 1 || *port > 65535 {
		fmt.Fprintf(os.Stderr, "go_server: -port %d is not valid; expected 1..65535\n", *port)
		os.Exit(2)
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_server: cannot listen on %s: %v\n", addr, err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.HandlerFunc(hello)}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		fmt.Fprintf(os.Stderr, "go_server: %v\n", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	down, cancel := context.WithTimeout(context.Background(), shutdownBound)
	defer cancel()
	if err := srv.Shutdown(down); err != nil {
		fmt.Fprintf(os.Stderr, "go_server: shutdown: %v\n", err)
		os.Exit(1)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "go_server: %v\n", err)
		os.Exit(1)
	}
}
