module github.com/agentsessions/sessions

go 1.26
