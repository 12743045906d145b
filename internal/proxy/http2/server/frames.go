package server

// The reader's handling of each frame type but HEADERS and CONTINUATION
// (stream.go): PING, PRIORITY, SETTINGS, WINDOW_UPDATE, RST_STREAM and
// DATA, with the flow-control windows they move.

import (
	"context"
	"fmt"

	"golang.org/x/net/http2"

	"github.com/straitmesh/strait/internal/proxy/http2/wire"
)

func (c *Conn) processFrame(ctx context.Context, f http2.Frame) error {
	c.mu.Lock()
	ignore := c.goAwayFinal && f.Header().StreamID > c.goAwayID
	c.mu.Unlock()
	if ignore {
		// A stream opened after the final GOAWAY: not processed; its
		// DATA still counts against (and returns) the connection window.
		if d, ok := f.(*http2.DataFrame); ok {
			return c.discardData(d.Length)
		}
		return nil
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(ctx, f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.GoAwayFrame:
		go c.Shutdown()
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PriorityFrame:
		return c.onPriority(f.StreamID, f.PriorityParam)
	case *http2.PushPromiseFrame:
		return fmt.Errorf("PUSH_PROMISE from a client: %w", http2.ConnectionError(http2.ErrCodeProtocol))
	}
	// Unknown frame types are ignored.
	return nil
}

func (c *Conn) onPing(f *http2.PingFrame) error {
	if !f.IsAck() {
		data := f.Data
		return c.writeControl(func(fr *http2.Framer) error { return fr.WritePing(true, data) })
	}
	c.mu.Lock()
	drain := c.shutdown && wire.Acks(f, wire.DrainPingData)
	c.mu.Unlock()
	if drain {
		c.finalGoAway()
	}
	return nil
}

func (c *Conn) onPriority(id uint32, p http2.PriorityParam) error {
	if p.StreamDep == id {
		c.resetStream(id, http2.ErrCodeProtocol) // a stream cannot depend on itself
		return nil
	}
	c.mu.Lock()
	c.priorities++
	flood := c.priorities > maxPriorityPerStream*(1+c.opened)
	c.mu.Unlock()
	if flood {
		return fmt.Errorf("too many PRIORITY frames: %w", http2.ConnectionError(http2.ErrCodeEnhanceYourCalm))
	}
	return nil
}

func (c *Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.mu.Lock()
		c.unackedSettings--
		bad := c.unackedSettings < 0
		c.mu.Unlock()
		if bad {
			return fmt.Errorf("SETTINGS ACK for no SETTINGS: %w", http2.ConnectionError(http2.ErrCodeProtocol))
		}
		return nil
	}
	if f.NumSettings() > 100 || f.HasDuplicates() {
		return fmt.Errorf("SETTINGS with too many or duplicate settings: %w", http2.ConnectionError(http2.ErrCodeProtocol))
	}
	var tableSize uint32
	var hasTable bool
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			if err := wire.ShiftSendWindows(c.streams, streamSendWindow, uint32(c.peerInitWin), s.Val); err != nil {
				return err
			}
			c.peerInitWin = int32(s.Val)
			c.wakeSendersLocked()
		case http2.SettingHeaderTableSize:
			tableSize, hasTable = min(s.Val, headerTableSize), true
		}
		return nil
	})
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.nc.Wake()
	// Settings that the writer reads are applied under wmu, with the ACK,
	// so that every frame written after the ACK follows them.
	return c.writeControl(func(fr *http2.Framer) error {
		_ = f.ForeachSetting(func(s http2.Setting) error {
			if s.ID == http2.SettingMaxFrameSize {
				c.maxFrame.Store(s.Val)
			}
			return nil
		})
		if hasTable {
			c.encLimit = tableSize
			c.wr.henc.SetMaxDynamicTableSizeLimit(tableSize)
		}
		return fr.WriteSettingsAck()
	})
}

func (c *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	c.windowUpdates++
	if c.windowUpdates > 5+2*(c.opened+maxWindowUpdatesPerData*c.dataSent) {
		c.mu.Unlock()
		return fmt.Errorf("too many WINDOW_UPDATE frames: %w", http2.ConnectionError(http2.ErrCodeEnhanceYourCalm))
	}
	if f.StreamID == 0 {
		if !c.connSendWin.Grow(f.Increment) {
			c.mu.Unlock()
			return wire.ErrConnWindowOverflow
		}
		c.wakeSendersLocked()
		c.mu.Unlock()
		return nil
	}
	s, err := c.lookupLocked(f.StreamID, "WINDOW_UPDATE")
	if s == nil {
		c.mu.Unlock()
		return err
	}
	if !s.sendWin.Grow(f.Increment) {
		c.mu.Unlock()
		c.resetStream(f.StreamID, http2.ErrCodeFlowControl)
		return nil
	}
	c.wakeSendersLocked()
	c.mu.Unlock()
	return nil
}

func (c *Conn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	s, err := c.lookupLocked(f.StreamID, "RST_STREAM")
	if s != nil {
		s.failLocked(http2.StreamError{StreamID: s.id, Code: f.ErrCode})
		c.removeLocked(s)
	}
	c.mu.Unlock()
	if s != nil {
		c.nc.Wake()
	}
	return err
}

// discardData counts n bytes of DATA that nobody reads against the
// connection window and gives them back.
func (c *Conn) discardData(n uint32) error {
	c.mu.Lock()
	if !c.connWin.Take(n) {
		c.mu.Unlock()
		return wire.ErrDataPastConnWindow
	}
	inc := c.returnConnWindowLocked(n)
	c.mu.Unlock()
	c.sendWindowUpdates(inc, 0, 0)
	return nil
}

// returnConnWindowLocked gives n bytes of connection window back to the
// peer, in WINDOW_UPDATEs of at least a quarter of the window (mu held);
// it returns the increment to send (0: none yet).
func (c *Conn) returnConnWindowLocked(n uint32) uint32 {
	return c.connWin.Return(n)
}

func (c *Conn) sendWindowUpdates(connInc uint32, id, streamInc uint32) {
	if connInc == 0 && streamInc == 0 {
		return
	}
	_ = c.writeControl(func(fr *http2.Framer) error { return wire.WriteWindowUpdates(fr, connInc, id, streamInc) })
}

func (c *Conn) onData(f *http2.DataFrame) error {
	n := f.Length // with padding: all of it counts against the windows
	c.mu.Lock()
	if !c.connWin.Take(n) {
		c.mu.Unlock()
		return wire.ErrDataPastConnWindow
	}
	s, err := c.lookupLocked(f.StreamID, "DATA")
	if s == nil {
		inc := c.returnConnWindowLocked(n)
		c.mu.Unlock()
		c.sendWindowUpdates(inc, 0, 0)
		if err != nil {
			return err
		}
		c.resetStream(f.StreamID, http2.ErrCodeStreamClosed)
		return nil
	}
	data := f.Data()
	var fail http2.ErrCode
	var connInc uint32
	switch {
	case s.recvDone:
		fail = http2.ErrCodeStreamClosed
	case !s.recvWin.Take(n):
		fail = http2.ErrCodeFlowControl
	case s.declLen >= 0 && s.received+int64(len(data)) > s.declLen:
		fail = http2.ErrCodeProtocol
	}
	if fail != 0 {
		connInc = c.returnConnWindowLocked(n)
		c.mu.Unlock()
		c.sendWindowUpdates(connInc, 0, 0)
		c.resetStream(s.id, fail)
		return nil
	}
	s.received += int64(len(data))
	pad := n - uint32(len(data))
	if s.bodyClosed {
		// The handler no longer reads: the bytes go back at once.
		connInc = c.returnConnWindowLocked(uint32(len(data)))
	} else if len(data) > 0 {
		if s.buf == nil {
			s.buf = wire.GetBodyBuf(len(data))
		}
		s.buf = append(s.buf, data...)
	}
	if pad > 0 {
		connInc = c.returnConnWindowLocked(pad)
		s.recvWin.Hold(pad)
	}
	if f.StreamEnded() {
		if s.declLen >= 0 && s.received != s.declLen {
			c.mu.Unlock()
			c.sendWindowUpdates(connInc, 0, 0)
			c.resetStream(s.id, http2.ErrCodeProtocol)
			return nil
		}
		s.endRecvLocked()
	}
	s.cond.Broadcast()
	c.mu.Unlock()
	c.sendWindowUpdates(connInc, 0, 0)
	return nil
}

// streamSendWindow is s's send window, for wire.ShiftSendWindows.
func streamSendWindow(s *stream) *wire.SendWindow { return &s.sendWin }
