module example.com/wrinkles

go 1.19
