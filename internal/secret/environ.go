package secret

import "errors"

// ErrScrubPartial is returned by ScrubEnviron on systems where the
// variables were unset for this process and its children but their
// values could not be wiped from the initial environment block.
var ErrScrubPartial = errors.New("secret: scrub environment: values unset but not wiped from the initial environment block on this system")
