package http1

// ParkBuffer gives the read buffer back to the pool while the connection
// waits for its next message, so that an idle keep-alive connection holds
// no buffer. It reports false, keeping the buffer, when bytes are still
// unread. UnparkBuffer must be called before the next read.
func (b *Reader) ParkBuffer() bool {
	if b.r != b.w || b.buf == nil {
		return b.buf == nil
	}
	if !b.big {
		buf := b.buf[:DefaultBufferSize]
		bufPool.Put(&buf)
	}
	b.buf, b.big, b.r, b.w, b.scan = nil, false, 0, 0, 0
	return true
}

// UnparkBuffer takes a pooled buffer after ParkBuffer; it does nothing when
// the Reader has one.
func (b *Reader) UnparkBuffer() {
	if b.buf == nil {
		b.buf = *(bufPool.Get().(*[]byte))
	}
}
