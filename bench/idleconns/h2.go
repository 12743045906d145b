package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// useH2 dials addr, speaks HTTP/2 with prior knowledge (h2c), sends one
// GET on stream 1 and reads its whole response, then leaves the
// connection idle (with -h2: what an idle HTTP/2 connection costs).
func useH2(addr, path string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := h2Request(c, path); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func h2Request(c net.Conn, path string) error {
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "bench"}, {Name: ":path", Value: path},
		{Name: "user-agent", Value: "idleconns"},
	} {
		if err := enc.WriteField(f); err != nil {
			return err
		}
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return err
	}
	status := ""
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := fr.WritePing(true, f.Data); err != nil {
					return err
				}
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v", f.ErrCode)
		case *http2.RSTStreamFrame:
			return fmt.Errorf("RST_STREAM %v", f.ErrCode)
		case *http2.HeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
				return err
			}
			if f.StreamEnded() {
				return h2Status(status)
			}
		case *http2.DataFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				return h2Status(status)
			}
		}
	}
}

func h2Status(s string) error {
	if n, err := strconv.Atoi(s); err != nil || n != 200 {
		return errors.New("status " + s + ", want 200")
	}
	return nil
}
