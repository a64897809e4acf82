module nodeagent.test/pause

go 1.22
