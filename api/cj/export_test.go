package cj

import "github.com/thehub/hub/models"

// SetChecked makes f run when a create or delete of s has passed its
// checks, before its transaction (Server.checked).
func SetChecked(s *Server, f func(op string, it *models.CJItem)) { s.checked = f }
