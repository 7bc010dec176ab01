package changes

import (
	"context"
	"fmt"
	"strings"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// StartAction records an operator action asked by user (PENDING) and
// starts its ActionWorkflow; an action the hub does not know is refused
// on the field "action".
func (s *Service) StartAction(ctx context.Context, action string, userID int64) (*models.Action, error) {
	action = strings.TrimSpace(action)
	v := models.FieldErrors{}
	if action == "" {
		v.Add("action", "This field is required.")
	} else if _, known := workflows.Actions[action]; !known {
		v.Add("action", fmt.Sprintf("Unknown action %q; the actions are: %s.", action, strings.Join(workflows.ActionNames(), ", ")))
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var a *models.Action
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		var err error
		if a, err = models.CreateAction(ctx, tx, action, userID); err != nil {
			return err
		}
		start, err := NewStart(workflows.ActionWorkflowID(a.ID), workflows.ActionWorkflowName, workflows.ActionInput{ID: a.ID, Action: action})
		if err != nil {
			return err
		}
		return tx.Owe(ctx, KindAction, a.ID, start)
	})
	if err != nil {
		return nil, err
	}
	return models.GetAction(ctx, s.DB, a.ID)
}
