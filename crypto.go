package queen

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"

	"github.com/queenlite/queen/internal/record"
)

// seal encrypts a payload with AES-256-GCM under Options.EncryptionKey.
// The stored form is nonce || ciphertext+tag.
func (b *Broker) seal(plain []byte) ([]byte, error) {
	aead, err := b.aead()
	if err != nil {
		return nil, err
	}
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return aead.Seal(out, out, plain, nil), nil
}

// openPayload returns a stored message's JSON payload, decrypting it.
func (b *Broker) openPayload(m *record.Message) ([]byte, error) {
	if m.Flags&record.FlagEncrypted == 0 {
		return m.Payload, nil
	}
	return b.open(m.Payload)
}

func (b *Broker) open(sealed []byte) ([]byte, error) {
	aead, err := b.aead()
	if err != nil {
		return nil, err
	}
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, fmt.Errorf("queen: encrypted payload too short")
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return nil, fmt.Errorf("queen: decrypt payload: %w", err)
	}
	return plain, nil
}

func (b *Broker) aead() (cipher.AEAD, error) {
	if len(b.opts.EncryptionKey) != 32 {
		return nil, fmt.Errorf("%w: message is encrypted but Options.EncryptionKey is not set", ErrInvalidArgument)
	}
	block, err := aes.NewCipher(b.opts.EncryptionKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
