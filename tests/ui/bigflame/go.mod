module bigflame

go 1.19
