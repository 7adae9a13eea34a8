module example.com/srcapp

go 1.19
