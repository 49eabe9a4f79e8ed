package discordtest

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// maxContent is Discord's limit of message content, in code points.
const maxContent = 2000

// route is a parsed REST path.
type route struct {
	name  string // fault and bucket name
	major string // channel id, webhook token or application id
	parts []string
	auth  bool // needs the bot token
}

func parseRoute(path string) (route, bool) {
	p := strings.Split(strings.Trim(path, "/"), "/")
	n := len(p)
	r := route{parts: p, auth: true}
	switch {
	case n == 2 && p[0] == "gateway" && p[1] == "bot":
		r.name = "gateway"
	case n == 2 && p[0] == "users" && p[1] == "@me":
		r.name = "me"
	case n == 2 && p[0] == "applications" && p[1] == "@me":
		r.name = "app"
	case n == 2 && p[0] == "channels":
		r.name, r.major = "channel", p[1]
	case n == 3 && p[0] == "channels" && p[2] == "messages":
		r.name, r.major = "messages", p[1]
	case n == 3 && p[0] == "channels" && p[2] == "typing":
		r.name, r.major = "typing", p[1]
	case n == 4 && p[0] == "channels" && p[2] == "messages":
		r.name, r.major = "message", p[1]
	case n == 5 && p[0] == "channels" && p[2] == "messages" && p[4] == "threads":
		r.name, r.major = "threads", p[1]
	case n == 7 && p[0] == "channels" && p[2] == "messages" && p[4] == "reactions" && p[6] == "@me":
		r.name, r.major = "reaction", p[1]
	case n == 3 && p[0] == "applications" && p[2] == "commands":
		r.name, r.major = "commands", "global"
	case n == 5 && p[0] == "applications" && p[2] == "guilds" && p[4] == "commands":
		r.name, r.major = "commands", p[3]
	case n == 4 && p[0] == "interactions" && p[3] == "callback":
		r.name, r.major, r.auth = "callback", p[1], false
	case (n == 3 || n == 5) && p[0] == "webhooks":
		r.name, r.major, r.auth = "webhook", p[2], false
	default:
		return r, false
	}
	return r, true
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	rt, ok := parseRoute(strings.TrimPrefix(r.URL.Path, "/api/v10"))
	call := Call{Method: r.Method, Route: strings.TrimPrefix(r.URL.Path, "/api/v10"), Time: time.Now()}
	body, files, err := readBody(r)
	call.Body, call.Files = body, files
	status := s.handle(w, r, rt, ok, body, files, err)
	call.Status = status
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

// handle answers one request and returns its status.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, rt route, known bool, body json.RawMessage, files map[string][]byte, bodyErr error) int {
	if rt.auth && r.Header.Get("Authorization") != "Bot "+s.Token {
		apiError(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		return http.StatusUnauthorized
	}
	if !known {
		apiError(w, http.StatusNotFound, 0, "404: Not Found")
		return http.StatusNotFound
	}
	if bodyErr != nil {
		apiError(w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return http.StatusBadRequest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.faultLocked(w, r.Method+" "+rt.name, rt.major); ok {
		return st
	}
	if !s.rateCheckLocked(w, rt.name, rt.major) {
		return http.StatusTooManyRequests
	}
	switch r.Method + " " + rt.name {
	case "GET gateway":
		u := "ws" + strings.TrimPrefix(s.URL, "http") + "/gateway"
		writeJSON(w, http.StatusOK, map[string]any{"url": u, "shards": 1,
			"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}})
	case "GET me":
		writeJSON(w, http.StatusOK, s.Bot)
	case "GET app":
		writeJSON(w, http.StatusOK, map[string]any{"id": s.Bot.ID, "name": s.Bot.Username, "bot": s.Bot})
	case "GET channel":
		c, ok := s.channels[rt.major]
		if !ok {
			apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
			return http.StatusNotFound
		}
		writeJSON(w, http.StatusOK, c)
	case "POST messages":
		return s.createLocked(w, rt.major, body, files, s.Bot, "")
	case "PATCH message":
		return s.editLocked(w, rt.major, rt.parts[3], body)
	case "GET message":
		m := s.findLocked(rt.major, rt.parts[3])
		if m == nil {
			apiError(w, http.StatusNotFound, 10008, "Unknown Message")
			return http.StatusNotFound
		}
		writeJSON(w, http.StatusOK, m)
	case "DELETE message":
		return s.deleteLocked(w, rt.major, rt.parts[3])
	case "POST typing":
		if _, ok := s.channels[rt.major]; !ok {
			apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
			return http.StatusNotFound
		}
		s.typing[rt.major]++
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	case "PUT reaction":
		m := s.findLocked(rt.major, rt.parts[3])
		if m == nil {
			apiError(w, http.StatusNotFound, 10008, "Unknown Message")
			return http.StatusNotFound
		}
		m.Reactions = append(m.Reactions, rt.parts[5])
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	case "POST threads":
		return s.threadLocked(w, rt.major, rt.parts[3], body)
	case "PUT commands":
		if rt.parts[1] != s.Bot.ID {
			apiError(w, http.StatusForbidden, 50001, "Missing Access")
			return http.StatusForbidden
		}
		var cmds []map[string]any
		if err := json.Unmarshal(body, &cmds); err != nil {
			apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return http.StatusBadRequest
		}
		s.commands[rt.major] = append(json.RawMessage(nil), body...)
		writeJSON(w, http.StatusOK, cmds)
	case "POST callback":
		return s.callbackLocked(w, rt.parts[1], rt.parts[2], body)
	case "POST webhook", "PATCH webhook", "DELETE webhook":
		return s.webhookLocked(w, r.Method, rt, body, files)
	default:
		apiError(w, http.StatusMethodNotAllowed, 0, "405: Method Not Allowed")
		return http.StatusMethodNotAllowed
	}
	return http.StatusOK
}

// readBody returns the JSON body: the request body, or the payload_json
// field of a multipart body, whose files it returns too.
func readBody(r *http.Request) (json.RawMessage, map[string][]byte, error) {
	if r.Body == nil {
		return nil, nil, nil
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil || len(raw) == 0 {
		return nil, nil, err
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if !json.Valid(raw) {
			return nil, nil, io.ErrUnexpectedEOF
		}
		return raw, nil, nil
	}
	mr := multipart.NewReader(bytes.NewReader(raw), params["boundary"])
	files := map[string][]byte{}
	var payload json.RawMessage
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, nil, err
		}
		if p.FormName() == "payload_json" {
			payload = data
		} else {
			files[p.FileName()] = data
		}
	}
	if payload != nil && !json.Valid(payload) {
		return nil, nil, io.ErrUnexpectedEOF
	}
	return payload, files, nil
}

// outMsg is the part of a create or edit body the fake reads.
type outMsg struct {
	Content         *string          `json:"content"`
	Components      *json.RawMessage `json:"components"`
	Flags           int              `json:"flags"`
	Reference       *Reference       `json:"message_reference"`
	AllowedMentions json.RawMessage  `json:"allowed_mentions"`
}

func (s *Server) findLocked(channel, id string) *Message {
	m := s.byID[id]
	if m == nil || m.ChannelID != channel {
		return nil
	}
	return m
}

// checkContent answers a 400 for content Discord refuses.
func checkContent(w http.ResponseWriter, content string, files int) bool {
	if n := utf8.RuneCountInString(content); n > maxContent {
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
		return false
	}
	if content == "" && files == 0 {
		apiError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return false
	}
	return true
}

func (s *Server) createLocked(w http.ResponseWriter, channel string, body json.RawMessage, files map[string][]byte, author User, ephemeral string) int {
	c, ok := s.channels[channel]
	if !ok {
		apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return http.StatusNotFound
	}
	var in outMsg
	if err := json.Unmarshal(body, &in); err != nil && len(body) > 0 {
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return http.StatusBadRequest
	}
	content := ""
	if in.Content != nil {
		content = *in.Content
	}
	if !checkContent(w, content, len(files)) {
		return http.StatusBadRequest
	}
	m := &Message{ID: s.newIDLocked(), ChannelID: channel, GuildID: c.GuildID, Content: content, Author: author,
		Flags: in.Flags, Reference: in.Reference, AllowedMentions: in.AllowedMentions, Files: files, Ephemeral: ephemeral,
		Timestamp: time.Now().UTC().Format(time.RFC3339)}
	if in.Components != nil {
		m.Components = *in.Components
	}
	for name, data := range files {
		id := s.newIDLocked()
		s.cdn[id] = data
		u := s.URL + "/cdn/attachments/" + id + "/" + name
		m.Attachments = append(m.Attachments, Attachment{ID: id, Filename: name, Size: len(data), URL: u, ProxyURL: u})
	}
	s.storeLocked(m)
	writeJSON(w, http.StatusOK, m)
	return http.StatusOK
}

func (s *Server) editLocked(w http.ResponseWriter, channel, id string, body json.RawMessage) int {
	m := s.findLocked(channel, id)
	if m == nil {
		apiError(w, http.StatusNotFound, 10008, "Unknown Message")
		return http.StatusNotFound
	}
	var in outMsg
	if err := json.Unmarshal(body, &in); err != nil {
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body")
		return http.StatusBadRequest
	}
	if in.Content != nil {
		if !checkContent(w, *in.Content, len(m.Attachments)) {
			return http.StatusBadRequest
		}
		m.Content = *in.Content
	}
	if in.Components != nil {
		m.Components = *in.Components
	}
	if in.Flags != 0 {
		m.Flags = in.Flags
	}
	m.Edits = append(m.Edits, time.Now())
	writeJSON(w, http.StatusOK, m)
	return http.StatusOK
}

func (s *Server) deleteLocked(w http.ResponseWriter, channel, id string) int {
	m := s.findLocked(channel, id)
	if m == nil {
		apiError(w, http.StatusNotFound, 10008, "Unknown Message")
		return http.StatusNotFound
	}
	delete(s.byID, id)
	list := s.msgs[channel]
	for i, x := range list {
		if x.ID == id {
			s.msgs[channel] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// threadLocked starts a thread from a message: the thread's id is the
// message's id, as on Discord.
func (s *Server) threadLocked(w http.ResponseWriter, channel, id string, body json.RawMessage) int {
	parent, ok := s.channels[channel]
	if !ok {
		apiError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return http.StatusNotFound
	}
	if s.findLocked(channel, id) == nil {
		apiError(w, http.StatusNotFound, 10008, "Unknown Message")
		return http.StatusNotFound
	}
	if parent.Type != ChannelText {
		apiError(w, http.StatusBadRequest, 50024, "Cannot execute action on this channel type")
		return http.StatusBadRequest
	}
	if _, exists := s.channels[id]; exists {
		apiError(w, http.StatusBadRequest, 160004, "A thread has already been created for this message")
		return http.StatusBadRequest
	}
	var in struct {
		Name        string `json:"name"`
		AutoArchive int    `json:"auto_archive_duration"`
	}
	_ = json.Unmarshal(body, &in)
	if n := utf8.RuneCountInString(in.Name); n < 1 || n > 100 {
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body: name: Must be between 1 and 100 in length.")
		return http.StatusBadRequest
	}
	switch in.AutoArchive {
	case 0, 60, 1440, 4320, 10080:
	default:
		apiError(w, http.StatusBadRequest, 50035, "Invalid Form Body: auto_archive_duration: Value must be one of (60, 1440, 4320, 10080).")
		return http.StatusBadRequest
	}
	if in.AutoArchive == 0 {
		in.AutoArchive = 1440
	}
	c := &Channel{ID: id, Type: ChannelThread, GuildID: parent.GuildID, ParentID: channel, OwnerID: s.Bot.ID, Name: in.Name, AutoArchive: in.AutoArchive}
	s.channels[id] = c
	writeJSON(w, http.StatusCreated, c)
	return http.StatusCreated
}
