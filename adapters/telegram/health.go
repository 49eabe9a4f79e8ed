package telegram

// Health returns nil while the adapter can work, or why it stopped:
// Telegram rejected the bot token (401). pibot keeps serving its other
// adapters and fails /readyz with this error.
func (a *Adapter) Health() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// refuse records that Run stopped for good because of err, and returns
// err.
func (a *Adapter) refuse(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused = err
	return err
}
