package queen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/queenlite/queen/internal/uuid"
)

// A backup file is a header, chunks of entries and an end chunk:
//
//	header  magic "QUEENBAK", u16 file version, u16 zero, u32 store format,
//	        u64 since, u64 next, 16-byte store id, u32 CRC-32C of the 48
//	        bytes before it
//	chunk   u8 type (1 entries, 2 end), u32 payload length, payload,
//	        u32 CRC-32C of type, length and payload
//	entry   u8 op (1 set, 2 keep), uvarint bytes shared with the previous
//	        key, uvarint length of the rest, the rest of the key, and for
//	        a set uvarint value length and the value
//	end     u64 entries, u64 next (again)
//
// Integers are big-endian. Entries are in key order, each key once. A
// full backup (since 0) has sets only; an increment has a set for every
// key written after since and a keep for every other key, so a restore
// learns which keys were deleted (those its base has and the increment
// does not name) without Badger's delete markers, which compactions drop.

const (
	backupMagic       = "QUEENBAK"
	backupFileVersion = 1
	backupHeaderSize  = 52

	chunkEntries byte = 1
	chunkEnd     byte = 2

	entrySet  byte = 1
	entryKeep byte = 2

	// chunkTarget is the payload size after which the writer ends a chunk.
	chunkTarget = 1 << 20
	// maxChunk bounds a chunk's stated length, so a corrupt length is
	// refused before it is read (an entry holds one key and one value:
	// Badger's limits keep it well under this).
	maxChunk = 1 << 31
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// backupHeader is what a backup file says about itself.
type backupHeader struct {
	Format      int       // store format of the store backed up
	Since, Next uint64    // see Broker.Backup
	Store       uuid.UUID // the id in the store's format record
}

// backupWriter writes a backup file.
type backupWriter struct {
	w       io.Writer
	buf     []byte // the chunk being filled
	prev    []byte // the previous key
	entries uint64
	next    uint64
}

func newBackupWriter(w io.Writer, h backupHeader) (*backupWriter, error) {
	hdr := make([]byte, 0, backupHeaderSize)
	hdr = append(hdr, backupMagic...)
	hdr = binary.BigEndian.AppendUint16(hdr, backupFileVersion)
	hdr = binary.BigEndian.AppendUint16(hdr, 0)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(h.Format))
	hdr = binary.BigEndian.AppendUint64(hdr, h.Since)
	hdr = binary.BigEndian.AppendUint64(hdr, h.Next)
	hdr = append(hdr, h.Store[:]...)
	hdr = binary.BigEndian.AppendUint32(hdr, crc32.Checksum(hdr, castagnoli))
	if _, err := w.Write(hdr); err != nil {
		return nil, err
	}
	return &backupWriter{w: w, next: h.Next}, nil
}

// add appends one entry; val is ignored for a keep.
func (bw *backupWriter) add(op byte, key, val []byte) error {
	shared := 0
	for shared < len(key) && shared < len(bw.prev) && key[shared] == bw.prev[shared] {
		shared++
	}
	bw.buf = append(bw.buf, op)
	bw.buf = binary.AppendUvarint(bw.buf, uint64(shared))
	bw.buf = binary.AppendUvarint(bw.buf, uint64(len(key)-shared))
	bw.buf = append(bw.buf, key[shared:]...)
	if op == entrySet {
		bw.buf = binary.AppendUvarint(bw.buf, uint64(len(val)))
		bw.buf = append(bw.buf, val...)
	}
	bw.prev = append(bw.prev[:0], key...)
	bw.entries++
	if len(bw.buf) >= chunkTarget {
		return bw.flush()
	}
	return nil
}

// flush writes the entries gathered as one chunk.
func (bw *backupWriter) flush() error {
	if len(bw.buf) == 0 {
		return nil
	}
	err := writeChunk(bw.w, chunkEntries, bw.buf)
	bw.buf = bw.buf[:0]
	return err
}

// close writes what is left and the end chunk.
func (bw *backupWriter) close() error {
	if err := bw.flush(); err != nil {
		return err
	}
	end := binary.BigEndian.AppendUint64(nil, bw.entries)
	end = binary.BigEndian.AppendUint64(end, bw.next)
	return writeChunk(bw.w, chunkEnd, end)
}

func writeChunk(w io.Writer, typ byte, payload []byte) error {
	var head [5]byte
	head[0] = typ
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(head[:], castagnoli), castagnoli, payload)
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	if _, err := w.Write(payload); err != nil {
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc))
	return err
}

// corrupt reports a backup that cannot be trusted.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptBackup, fmt.Sprintf(format, args...))
}

// backupReader reads a backup file, checking every checksum.
type backupReader struct {
	r       *bufio.Reader
	h       backupHeader
	chunk   []byte // the rest of the current chunk's entries
	buf     bytes.Buffer
	prev    []byte
	spare   []byte // the buffer prev is not using
	entries uint64
	done    bool
}

// readBackupHeader reads and checks the header.
func readBackupHeader(r io.Reader) (*backupReader, error) {
	br := &backupReader{r: bufio.NewReaderSize(r, 64<<10)}
	hdr := make([]byte, backupHeaderSize)
	if n, err := io.ReadFull(br.r, hdr); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, corrupt("empty file")
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, corrupt("header cut short after %d bytes", n)
		}
		return nil, fmt.Errorf("queen: read backup: %w", err)
	}
	if string(hdr[:8]) != backupMagic {
		return nil, corrupt("not a queen backup (no %q at its start)", backupMagic)
	}
	if crc32.Checksum(hdr[:48], castagnoli) != binary.BigEndian.Uint32(hdr[48:]) {
		return nil, corrupt("header checksum mismatch")
	}
	if v := binary.BigEndian.Uint16(hdr[8:]); v != backupFileVersion {
		return nil, &IncompatibleStoreError{Found: int(binary.BigEndian.Uint32(hdr[12:])), Supported: StoreFormat, Oldest: OldestStoreFormat,
			Hint: fmt.Sprintf("backup file version %d, this release reads version %d", v, backupFileVersion)}
	}
	br.h = backupHeader{Format: int(binary.BigEndian.Uint32(hdr[12:])), Since: binary.BigEndian.Uint64(hdr[16:]), Next: binary.BigEndian.Uint64(hdr[24:]), Store: uuid.UUID(hdr[32:48])}
	return br, nil
}

// nextChunk reads the next chunk; at the end chunk it checks the counts
// and that nothing follows.
func (br *backupReader) nextChunk() error {
	var head [5]byte
	if n, err := io.ReadFull(br.r, head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return corrupt("cut short after %d entries (%d bytes into a chunk head, no end record)", br.entries, n)
		}
		return fmt.Errorf("queen: read backup: %w", err)
	}
	typ, n := head[0], binary.BigEndian.Uint32(head[1:])
	if (typ != chunkEntries && typ != chunkEnd) || n > maxChunk || (typ == chunkEnd && n != 16) {
		return corrupt("bad chunk head after %d entries", br.entries)
	}
	br.buf.Reset()
	// CopyN grows the buffer as bytes arrive: a length that lies about a
	// truncated file allocates no more than the file holds.
	if _, err := io.CopyN(&br.buf, br.r, int64(n)+4); err != nil {
		if errors.Is(err, io.EOF) {
			return corrupt("cut short inside a chunk after %d entries", br.entries)
		}
		return fmt.Errorf("queen: read backup: %w", err)
	}
	b := br.buf.Bytes()
	payload, sum := b[:n], binary.BigEndian.Uint32(b[n:])
	if crc32.Update(crc32.Checksum(head[:], castagnoli), castagnoli, payload) != sum {
		return corrupt("chunk checksum mismatch after %d entries", br.entries)
	}
	if typ == chunkEntries {
		br.chunk = payload
		return nil
	}
	entries, next := binary.BigEndian.Uint64(payload), binary.BigEndian.Uint64(payload[8:])
	if entries != br.entries || next != br.h.Next {
		return corrupt("end record says %d entries up to version %d, read %d up to %d", entries, next, br.entries, br.h.Next)
	}
	if _, err := br.r.ReadByte(); err == nil {
		return corrupt("data after the end record")
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("queen: read backup: %w", err)
	}
	br.done = true
	return nil
}

// next returns the next entry, or io.EOF after the end record. key and val
// are valid until the following call.
func (br *backupReader) next() (op byte, key, val []byte, err error) {
	for len(br.chunk) == 0 {
		if br.done {
			return 0, nil, nil, io.EOF
		}
		if err := br.nextChunk(); err != nil {
			return 0, nil, nil, err
		}
	}
	b := br.chunk
	bad := func() (byte, []byte, []byte, error) {
		return 0, nil, nil, corrupt("malformed entry %d", br.entries+1)
	}
	op, b = b[0], b[1:]
	if op != entrySet && op != entryKeep {
		return bad()
	}
	shared, k := binary.Uvarint(b)
	if k <= 0 || shared > uint64(len(br.prev)) {
		return bad()
	}
	b = b[k:]
	rest, k := binary.Uvarint(b)
	if k <= 0 || rest > uint64(len(b)-k) {
		return bad()
	}
	b = b[k:]
	key = append(append(br.spare[:0], br.prev[:shared]...), b[:rest]...)
	b = b[rest:]
	if bytes.Compare(key, br.prev) <= 0 && br.entries > 0 {
		return bad() // keys are strictly ascending
	}
	if op == entrySet {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return bad()
		}
		val, b = b[k:k+int(n)], b[k+int(n):]
	}
	br.chunk = b
	br.prev, br.spare = key, br.prev
	br.entries++
	return op, key, val, nil
}
