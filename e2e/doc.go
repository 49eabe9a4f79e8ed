// Package e2e holds pibot's end-to-end tests: the real gateway
// (gateway.New and Run) with the real Telegram adapter pointed at the
// in-repo fake Bot API (adapters/telegram/telegramtest) and the scripted
// faux model. The tests drive pibot the way a person on a phone would —
// messages, replies, button presses, group mentions, forum topics — and
// the way a hostile network would — 429 storms, 5xx answers, redelivered
// updates after a crash — and check what the user sees, what the model
// was asked and what the session file holds.
//
// The package has no non-test code.
package e2e
