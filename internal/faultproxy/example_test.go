package faultproxy_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"

	"github.com/fenced-dev/fenced/internal/faultproxy"
)

// This example puts a proxy between a client and an echo server and cuts
// the link: the client's read runs into its deadline, as across a network
// partition.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()

	p, err := faultproxy.New(ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 5)
	c.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(c, "hello")
	io.ReadFull(c, buf)
	fmt.Printf("pass: %s\n", buf)

	p.SetMode(faultproxy.Blackhole)
	c.SetDeadline(time.Now().Add(100 * time.Millisecond))
	io.WriteString(c, "hello")
	_, err = io.ReadFull(c, buf)
	fmt.Println("blackhole timed out:", errors.Is(err, os.ErrDeadlineExceeded))

	// Output:
	// pass: hello
	// blackhole timed out: true
}
