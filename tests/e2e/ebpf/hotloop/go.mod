module hotloop

go 1.19
