package netns

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"
)

// Ping sends ICMP echo requests from inside the pod to dst, one a second,
// until a reply arrives (nil) or ctx ends (error). It needs no ping binary.
func (p *Pod) Ping(ctx context.Context, dst netip.Addr) error {
	var conn net.PacketConn
	if err := p.Do(nil, func() error {
		var err error
		conn, err = (&net.ListenConfig{}).ListenPacket(ctx, "ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return fmt.Errorf("testenv: ping from %s: %w", p.Name, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	id := uint16(os.Getpid())
	to := &net.IPAddr{IP: dst.AsSlice()}
	buf := make([]byte, 1500)
	for seq := uint16(1); ; seq++ {
		if _, err := conn.WriteTo(echoRequest(id, seq), to); err != nil {
			return fmt.Errorf("testenv: ping %s from %s: %w", dst, p.Name, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("testenv: ping %s from %s: no reply: %w", dst, p.Name, ctx.Err())
				}
				break // resend
			}
			// Echo reply: type 0, code 0, matching id.
			if ip, ok := from.(*net.IPAddr); ok && ip.IP.Equal(to.IP) && n >= 8 &&
				buf[0] == 0 && binary.BigEndian.Uint16(buf[4:6]) == id {
				return nil
			}
		}
	}
}

func echoRequest(id, seq uint16) []byte {
	b := make([]byte, 16)
	b[0] = 8 // echo request
	binary.BigEndian.PutUint16(b[4:], id)
	binary.BigEndian.PutUint16(b[6:], seq)
	copy(b[8:], "strait!!")
	var sum uint32
	for i := 0; i < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[2:], ^uint16(sum))
	return b
}
