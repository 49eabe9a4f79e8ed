package slacktest

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// result is a method's answer: fields merged into {"ok":true}, or an error
// code.
type result struct {
	fields map[string]any
	err    string
	needed string
}

func ok(fields map[string]any) result { return result{fields: fields} }
func fail(code string) result         { return result{err: code} }

// methods are the Web API methods the fake serves, with the token kind
// each needs ("bot" or "app").
var methods = map[string]struct {
	token string
	fn    func(s *Server, p map[string]string) result
}{
	"auth.test":                    {"bot", (*Server).authTest},
	"apps.connections.open":        {"app", (*Server).connectionsOpen},
	"chat.postMessage":             {"bot", (*Server).postMessage},
	"chat.postEphemeral":           {"bot", (*Server).postEphemeral},
	"chat.update":                  {"bot", (*Server).update},
	"chat.delete":                  {"bot", (*Server).delete},
	"chat.startStream":             {"bot", (*Server).startStream},
	"chat.appendStream":            {"bot", (*Server).appendStream},
	"chat.stopStream":              {"bot", (*Server).stopStream},
	"assistant.threads.setStatus":  {"bot", (*Server).setStatus},
	"reactions.add":                {"bot", (*Server).reactionsAdd},
	"files.getUploadURLExternal":   {"bot", (*Server).getUploadURL},
	"files.completeUploadExternal": {"bot", (*Server).completeUpload},
}

// params reads a request's parameters from a form or a JSON body.
func params(r *http.Request) (map[string]string, error) {
	p := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			return nil, err
		}
		if len(strings.TrimSpace(string(body))) == 0 || string(body) == "null" {
			return p, nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				p[k] = s
			} else {
				p[k] = string(v)
			}
		}
		return p, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	for k, v := range r.Form {
		p[k] = v[0]
	}
	return p, nil
}

// token returns the request's token: the Bearer header, else the form's
// token field.
func token(r *http.Request, p map[string]string) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimPrefix(h, "Bearer ")
	}
	return p["token"]
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	p, err := params(r)
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_form_data"})
		return
	}
	tok := token(r, p)
	delete(p, "token")
	call := Call{Method: method, Params: p, Code: http.StatusOK, Time: time.Now()}
	answer := func(code int, res result, h http.Header) {
		call.Code, call.Error = code, res.err
		s.mu.Lock()
		s.calls = append(s.calls, call)
		s.mu.Unlock()
		for k, v := range h {
			w.Header()[k] = v
		}
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, "<html>upstream unavailable</html>")
			return
		}
		body := map[string]any{"ok": res.err == ""}
		if res.err != "" {
			body["error"] = res.err
			if res.needed != "" {
				body["needed"] = res.needed
			}
		}
		for k, v := range res.fields {
			body[k] = v
		}
		writeJSON(w, code, body)
	}
	m, known := methods[method]
	if !known {
		answer(http.StatusOK, fail("unknown_method"), nil)
		return
	}
	want := s.BotToken
	if m.token == "app" {
		want = s.AppToken
	}
	switch {
	case tok == "":
		answer(http.StatusOK, fail("not_authed"), nil)
		return
	case tok == s.BotToken && m.token == "app", tok == s.AppToken && m.token == "bot":
		answer(http.StatusOK, fail("not_allowed_token_type"), nil)
		return
	case tok != want:
		answer(http.StatusOK, fail("invalid_auth"), nil)
		return
	}
	if f, ok := s.fault(method); ok {
		switch f.Kind {
		case Fault429:
			ra := max(f.RetryAfter, 1)
			s.rate.announce(method, time.Duration(ra)*time.Second)
			answer(http.StatusTooManyRequests, fail("ratelimited"), http.Header{"Retry-After": {strconv.Itoa(ra)}})
		case Fault5xx:
			answer(http.StatusServiceUnavailable, fail("service_unavailable"), nil)
		default:
			answer(http.StatusOK, result{err: f.Error, needed: f.Needed}, nil)
		}
		return
	}
	if v := s.rate.inWindow(method); v != "" {
		s.mu.Lock()
		s.violations = append(s.violations, v)
		s.mu.Unlock()
	}
	if ra := s.rate.take(method, p["channel"]); ra > 0 {
		answer(http.StatusTooManyRequests, fail("ratelimited"), http.Header{"Retry-After": {strconv.Itoa(int(ra / time.Second))}})
		return
	}
	answer(http.StatusOK, m.fn(s, p), nil)
}

func (s *Server) fault(method string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[method]
	if len(q) == 0 {
		return Fault{}, false
	}
	s.faults[method] = q[1:]
	return q[0], true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) authTest(map[string]string) result {
	return ok(map[string]any{"url": "https://fake.slack.test/", "team": "Fake", "user": "pibot",
		"team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": s.BotID})
}

func (s *Server) connectionsOpen(map[string]string) result {
	return ok(map[string]any{"url": "ws" + strings.TrimPrefix(s.URL, "http") + "/ws?ticket=" + strconv.Itoa(s.sock.ticket())})
}

// validChannel reports a channel id the fake knows the form of.
func validChannel(c string) bool {
	return len(c) > 1 && strings.ContainsRune("CDG", rune(c[0]))
}

func (s *Server) postMessage(p map[string]string) result {
	ch := p["channel"]
	if !validChannel(ch) {
		return fail("channel_not_found")
	}
	text := textOf(p["text"], p["blocks"])
	if strings.TrimSpace(text) == "" {
		return fail("no_text")
	}
	if len([]rune(p["text"])) > 40000 {
		return fail("msg_too_long")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if th := p["thread_ts"]; th != "" && s.find(ch, th) == nil {
		return fail("thread_not_found")
	}
	m := &Message{Channel: ch, TS: s.nextTS(), ThreadTS: p["thread_ts"], User: s.BotUserID, Text: text,
		Blocks: json.RawMessage(p["blocks"]), Buttons: buttonsOf(p["blocks"])}
	s.msgs[ch] = append(s.msgs[ch], m)
	return ok(map[string]any{"channel": ch, "ts": m.TS, "message": map[string]any{"text": m.Text, "ts": m.TS}})
}

func (s *Server) postEphemeral(p map[string]string) result {
	if !validChannel(p["channel"]) {
		return fail("channel_not_found")
	}
	if p["user"] == "" {
		return fail("user_not_in_channel")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ephemerals = append(s.ephemerals, Ephemeral{Channel: p["channel"], ThreadTS: p["thread_ts"], User: p["user"],
		Text: textOf(p["text"], p["blocks"]), Via: "chat.postEphemeral"})
	return ok(map[string]any{"message_ts": s.nextTS()})
}

func (s *Server) update(p map[string]string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(p["channel"], p["ts"])
	switch {
	case m == nil:
		return fail("message_not_found")
	case m.User != s.BotUserID:
		return fail("cant_update_message")
	}
	text := textOf(p["text"], p["blocks"])
	if strings.TrimSpace(text) == "" {
		return fail("no_text")
	}
	m.Text, m.Edits = text, m.Edits+1
	if b, set := p["blocks"]; set {
		m.Blocks, m.Buttons = json.RawMessage(b), buttonsOf(b)
	}
	return ok(map[string]any{"channel": m.Channel, "ts": m.TS, "text": m.Text})
}

func (s *Server) delete(p map[string]string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(p["channel"], p["ts"])
	switch {
	case m == nil:
		return fail("message_not_found")
	case m.User != s.BotUserID:
		return fail("cant_delete_message")
	}
	m.Deleted = true
	return ok(map[string]any{"channel": m.Channel, "ts": m.TS})
}

// startStream follows Slack's rules: a stream is a thread reply in DMs,
// and in channels it names its recipient.
func (s *Server) startStream(p map[string]string) result {
	ch := p["channel"]
	if !validChannel(ch) {
		return fail("channel_not_found")
	}
	if ch[0] == 'D' && p["thread_ts"] == "" {
		return fail("invalid_arguments")
	}
	if ch[0] != 'D' && (p["recipient_user_id"] == "" || p["recipient_team_id"] == "") {
		return fail("missing_recipient_user_id")
	}
	if len([]rune(p["markdown_text"])) > 12000 {
		return fail("msg_too_long")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if th := p["thread_ts"]; th != "" && s.find(ch, th) == nil {
		return fail("thread_not_found")
	}
	m := &Message{Channel: ch, TS: s.nextTS(), ThreadTS: p["thread_ts"], User: s.BotUserID, Text: p["markdown_text"],
		Stream: &Stream{RecipientUser: p["recipient_user_id"], RecipientTeam: p["recipient_team_id"]}}
	s.msgs[ch] = append(s.msgs[ch], m)
	return ok(map[string]any{"channel": ch, "ts": m.TS})
}

func (s *Server) streaming(p map[string]string) (*Message, string) {
	m := s.find(p["channel"], p["ts"])
	switch {
	case m == nil:
		return nil, "message_not_found"
	case m.Stream == nil || m.Stream.Stopped:
		return nil, "message_not_in_streaming_state"
	case len([]rune(p["markdown_text"])) > 12000:
		return nil, "msg_too_long"
	}
	return m, ""
}

func (s *Server) appendStream(p map[string]string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, e := s.streaming(p)
	if e != "" {
		return fail(e)
	}
	if p["markdown_text"] == "" {
		return fail("invalid_arguments")
	}
	m.Text += p["markdown_text"]
	m.Stream.Appends++
	return ok(map[string]any{"channel": m.Channel, "ts": m.TS})
}

func (s *Server) stopStream(p map[string]string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, e := s.streaming(p)
	if e != "" {
		return fail(e)
	}
	m.Text += p["markdown_text"]
	m.Stream.Stopped = true
	if b := p["blocks"]; b != "" {
		m.Blocks, m.Buttons = json.RawMessage(b), buttonsOf(b)
	}
	return ok(map[string]any{"channel": m.Channel, "ts": m.TS})
}

func (s *Server) setStatus(p map[string]string) result {
	if s.noAssistant {
		return result{err: "missing_scope", needed: "assistant:write"}
	}
	if p["channel_id"] == "" || p["thread_ts"] == "" {
		return fail("invalid_arguments")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses = append(s.statuses, Status{Channel: p["channel_id"], ThreadTS: p["thread_ts"], Status: p["status"]})
	return ok(nil)
}

func (s *Server) reactionsAdd(p map[string]string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.find(p["channel"], p["timestamp"])
	if m == nil {
		return fail("message_not_found")
	}
	for _, r := range m.Reacts {
		if r == p["name"] {
			return fail("already_reacted")
		}
	}
	m.Reacts = append(m.Reacts, p["name"])
	return ok(nil)
}

func (s *Server) getUploadURL(p map[string]string) result {
	if p["filename"] == "" || p["length"] == "" || p["length"] == "0" {
		return fail("invalid_arguments")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id("F")
	s.fileNames[id] = p["filename"]
	return ok(map[string]any{"upload_url": s.URL + "/upload/" + id, "file_id": id})
}

func (s *Server) completeUpload(p map[string]string) result {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p["files"]), &files); err != nil || len(files) == 0 {
		return fail("invalid_arguments")
	}
	ch := p["channel_id"]
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	var out []map[string]any
	for _, f := range files {
		if _, up := s.files[f.ID]; !up {
			return fail("file_not_found")
		}
		names = append(names, s.fileNames[f.ID])
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
	}
	if ch != "" {
		m := &Message{Channel: ch, TS: s.nextTS(), ThreadTS: p["thread_ts"], User: s.BotUserID, Text: p["initial_comment"], Files: names}
		s.msgs[ch] = append(s.msgs[ch], m)
	}
	return ok(map[string]any{"files": out})
}

// upload takes the multipart POST of files.getUploadURLExternal's URL.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.BotToken {
		http.Error(w, "invalid_auth", http.StatusUnauthorized)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	f, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	data, _ := io.ReadAll(f)
	s.mu.Lock()
	_, known := s.fileNames[id]
	if known {
		s.files[id] = data
	}
	s.mu.Unlock()
	if !known {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	_, _ = io.WriteString(w, "OK - "+strconv.Itoa(len(data)))
}

// AddFile stores a file a user attaches and returns its event form (for
// Say's files): id, name, mimetype, size and the private download URL on
// this server.
func (s *Server) AddFile(name, mimetype string, data []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.id("F")
	s.files[id], s.fileNames[id] = data, name
	u := s.URL + "/files/" + id + "/" + url.PathEscape(name)
	return map[string]any{"id": id, "name": name, "mimetype": mimetype, "size": len(data), "url_private": u, "url_private_download": u}
}

// download serves a file's private URL to the bot token only.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.BotToken {
		http.Error(w, "sign in", http.StatusForbidden)
		return
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	s.mu.Lock()
	data, ok := s.files[id]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(data)
}

// respond takes a response_url POST: at most 5 answers per URL.
func (s *Server) respond(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/response/")
	var body struct {
		Text            string `json:"text"`
		ResponseType    string `json:"response_type"`
		ReplaceOriginal bool   `json:"replace_original"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "error": "invalid_payload"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.responses[id]
	if rs == nil || rs.uses >= 5 {
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error": "used_url"})
		return
	}
	rs.uses++
	if body.ResponseType == "in_channel" {
		s.msgs[rs.channel] = append(s.msgs[rs.channel], &Message{Channel: rs.channel, TS: s.nextTS(), User: s.BotUserID, Text: body.Text})
	} else {
		s.ephemerals = append(s.ephemerals, Ephemeral{Channel: rs.channel, ThreadTS: rs.thread, User: rs.user, Text: body.Text, Via: "response_url"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
