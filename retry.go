package queen

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy is how a consumer retries a message whose handler failed
// (a plain error, a [Retry] or a panic). Without one, a failure is acked
// failed and the queue's RetryLimit and RetryDelay decide. With one, the
// loop gives the message back with an ack of status retry and a delay from
// the policy; that spends none of the queue's retry budget, holds back
// only the message's partition (for this group), and keeps the partition
// in order. Once the attempts are spent, or the message is older than
// MaxMessageAge, it is dead-lettered with the handler's error text.
//
// Attempts are counted from [Message.DeliveryAttempt], less the deliveries
// a consume loop of this broker gave back without a real attempt (messages
// skipped behind a failure, given back on shutdown, failed because the
// loop was stopping (see [Stopping]), or answered [InProgress]).
type RetryPolicy struct {
	// MaxAttempts is how many times the handler may see a message in all.
	// Zero means no limit (MaxMessageAge then bounds the retries, if set).
	MaxAttempts int
	// InitialDelay is the wait before the second attempt.
	InitialDelay time.Duration
	// Multiplier grows the delay after every further failure. Values
	// below 1 mean 1: a fixed delay.
	Multiplier float64
	// MaxDelay caps the delay. Zero means no cap.
	MaxDelay time.Duration
	// Jitter, from 0 to 1, is the largest fraction of each delay randomly
	// taken off it, so messages that failed together do not all come
	// back together. Zero means none.
	Jitter float64
	// MaxMessageAge dead-letters, instead of retrying, a message pushed
	// longer ago than this. Zero means no limit.
	MaxMessageAge time.Duration
}

// ExponentialRetry allows maxAttempts attempts, waiting initial before the
// second and doubling the wait each time up to maxDelay.
func ExponentialRetry(maxAttempts int, initial, maxDelay time.Duration) RetryPolicy {
	return RetryPolicy{MaxAttempts: maxAttempts, InitialDelay: initial, Multiplier: 2, MaxDelay: maxDelay}
}

// FixedRetry allows maxAttempts attempts with delay between them.
func FixedRetry(maxAttempts int, delay time.Duration) RetryPolicy {
	return RetryPolicy{MaxAttempts: maxAttempts, InitialDelay: delay, Multiplier: 1}
}

// NoRetry dead-letters a message at its first failure.
func NoRetry() RetryPolicy { return RetryPolicy{MaxAttempts: 1} }

// Backoff is the delay after the attempt-th failure of a message (attempt
// counts from 1), jitter included.
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	mult := max(p.Multiplier, 1)
	d := float64(p.InitialDelay) * math.Pow(mult, float64(attempt-1))
	if limit := float64(p.MaxDelay); p.MaxDelay > 0 && d > limit {
		d = limit
	}
	if d > math.MaxInt64/2 || math.IsInf(d, 0) || math.IsNaN(d) {
		d = math.MaxInt64 / 2
	}
	if p.Jitter > 0 && d > 0 {
		d -= d * min(p.Jitter, 1) * rand.Float64()
	}
	return time.Duration(d)
}

// exhausted reports whether a message that just failed its attempt-th
// attempt, pushed at created, has no retry left at now.
func (p RetryPolicy) exhausted(attempt int, created, now time.Time) bool {
	if p.MaxAttempts > 0 && attempt >= p.MaxAttempts {
		return true
	}
	return p.MaxMessageAge > 0 && now.Sub(created) >= p.MaxMessageAge
}

func (p RetryPolicy) validate() error {
	if err := firstNegative(signed{"RetryPolicy.MaxAttempts", p.MaxAttempts < 0}, signed{"RetryPolicy.InitialDelay", p.InitialDelay < 0},
		signed{"RetryPolicy.MaxDelay", p.MaxDelay < 0}, signed{"RetryPolicy.MaxMessageAge", p.MaxMessageAge < 0}); err != nil {
		return err
	}
	switch {
	case p.Multiplier < 0 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0):
		return argErr("RetryPolicy.Multiplier", "must be a finite number >= 0")
	case p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter):
		return argErr("RetryPolicy.Jitter", "must be between 0 and 1")
	}
	return nil
}
