module diffapp

go 1.19
