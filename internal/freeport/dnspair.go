package freeport

import (
	"fmt"
	"net"
)

// pairTries bounds ListenUDPTCP's attempts.
const pairTries = 20

// ListenUDPTCP listens on one port of host for both UDP and TCP, as a DNS
// server does, and returns both sockets open. The kernel picks the UDP
// port; its TCP twin may be held by another socket of the machine (a busy
// test suite's connections), so another port is tried then.
func ListenUDPTCP(host string) (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range pairTries {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("no port of %s free for both UDP and TCP in %d tries: %w", host, pairTries, lastErr)
}
